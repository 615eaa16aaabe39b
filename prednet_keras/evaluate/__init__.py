"""Evaluating trained models on held-out video, as kitti_evaluate.py did: which models (model_refs),
their predictions (prediction), the metrics, one table (metrics: the authors' MSE, SSIM, PSNR), the scores
(scoring) and the files and plots written from them (files). EvalError, a model argument or setting that
cannot be used, is shared by all."""



class EvalError(ValueError):
    """A model argument or evaluation setting that cannot be used."""
