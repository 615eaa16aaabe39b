"""Which models an evaluation means: command-line arguments resolved to .keras files, run folders and
shipped models (ModelRef), and loading one with a check that it holds the weights its run recorded."""

from pathlib import Path

from prednet_keras.files.diskwrite import file_sha256
from prednet_keras.evaluate import EvalError
from prednet_keras.session import folder as run_folders

__all__ = [
    "ModelRef",
    "check_evaluable",
    "file_checksum",
    "load_run_model",
    "resolve_models",
]


class ModelRef:
    """A model to evaluate: its file, a display name, and its run folder if any.

    Args:
        path: the .keras file.
        name: the name used in tables and folder names.
        run_folder: the run folder holding it, or None.
    """

    def __init__(self, path, name, run_folder=None):
        self.path = Path(path)
        self.name = name
        self.run_folder = None if run_folder is None else Path(run_folder)

    def __repr__(self):
        return f"ModelRef({str(self.path)!r}, name={self.name!r})"

    def default_output(self, suffix="eval"):
        """Where this model's results go unless told otherwise: `<run>/<suffix>`,
        `<stem>-<suffix>` beside a loose .keras file, or `./<name>-<suffix>` for a
        shipped model (its folder is a read-only record inside the package) and for
        a released model (its file is in Keras' cache folder)."""
        from prednet_keras import pretrained
        from prednet_keras.pretrained import released

        if self.run_folder is not None and pretrained.is_shipped(self.run_folder):
            return Path.cwd() / f"{self.run_folder.name}-{suffix}"
        if self.run_folder is None and released.is_cached(self.path):
            return Path.cwd() / f"{self.name}-{suffix}"
        if self.run_folder is not None:
            return self.run_folder / suffix
        return self.path.parent / f"{self.path.stem}-{suffix}"


def resolve_models(arguments):
    """Turns command-line arguments into the models they name.

    Args:
        arguments: paths, each a .keras file, a run folder, or a folder of run
            folders; or the name of a shipped model (prednet_keras.pretrained) or of
            one of the authors' released models (pretrained.released).

    Returns:
        A list of ModelRef, in argument order (runs of a folder sorted by name),
        with unique names.

    Raises:
        EvalError: a path that is none of these, or a run without model.keras yet.
    """
    from prednet_keras import pretrained
    from prednet_keras.pretrained import released

    found = []
    for argument in arguments:
        path = Path(argument)
        if not path.exists() and argument in released.names():
            # The authors' model, fetched and converted on first use, then from the cache.
            found.append(ModelRef(released.model_path(argument), argument))
            continue
        if not path.exists() and pretrained.ALIASES.get(argument, argument) in pretrained.names():
            path = pretrained.path(argument)
        if not path.exists():
            shipped = ", ".join(pretrained.names())
            raise EvalError(f"{argument}: no such file or folder (nor a shipped model: {shipped}; nor a released "
                            f"one: {', '.join(released.names())}).")
        if path.is_file():
            if path.suffix != ".keras":
                raise EvalError(f"{argument}: not a .keras model file, a run folder, or a folder of run folders.")
            run = path.parent if path.name == run_folders.MODEL and run_folders.is_run_folder(path.parent) else None
            found.append(ModelRef(path, path.parent.name if run is not None else path.stem, run))
            continue
        folders = run_folders.find_runs(path)
        if not folders:
            raise EvalError(
                f"{argument}: a folder, but neither a run folder (manifest.json, model.keras) nor a "
                "folder of run folders."
            )
        for folder in folders:
            model = folder / run_folders.MODEL
            if not model.is_file():
                if len(folders) == 1:
                    raise EvalError(f"{folder}: run folder without {run_folders.MODEL} yet (no epoch completed).")
                continue
            found.append(ModelRef(model, folder.name, folder if run_folders.is_run_folder(folder) else None))
        if not any(ref.path.parent in folders for ref in found):
            raise EvalError(f"{argument}: none of its run folders has a {run_folders.MODEL} yet.")
    names = [ref.name for ref in found]
    for ref in found:
        if names.count(ref.name) > 1:
            ref.name = f"{ref.path.parent.parent.name}/{ref.name}" if ref.run_folder else str(ref.path.with_suffix(""))
    if len({ref.path.resolve() for ref in found}) != len(found):
        raise EvalError("The same model is named twice.")
    return found


def run_kind(ref):
    """The model kind (model_kinds) the manifest of `ref`'s run records, or None: a loose .keras file, or a
    run that names no kind the registry knows (an older prednet-train run records none)."""
    from prednet_keras import model_kinds

    if ref.run_folder is None:
        return None
    name = run_folders.RunFolder(ref.run_folder).read_record().model_kind
    return model_kinds.find(name) if name else None


def evaluation(ref):
    """What prednet-eval scores of `ref`: "prediction", "reconstruction" (the autoencoder) or None (nothing),
    as its run's kind says; None for a model without a known kind (the caller looks at the model)."""
    kind = run_kind(ref)
    return kind.evaluation if kind is not None else None


def check_evaluable(refs):
    """Refuses, before any model is loaded, a run whose kind prednet-eval does not score (a user's own
    model): one line that says so and where the run's own measures are.

    Raises:
        EvalError: naming the first such run.
    """
    for ref in refs:
        kind = run_kind(ref)
        if kind is not None and kind.evaluation is None:
            manifest = run_folders.RunFolder(ref.run_folder).read_record()
            raise EvalError(
                f"{ref.run_folder} is a run of {kind.help}; prednet-eval scores only video "
                f"prediction and the MNIST autoencoder, so it does not evaluate it: "
                f"{kind.evaluation_note(manifest)} of {ref.run_folder}."
            )


def file_checksum(path):
    """sha256 of a file's bytes, as "sha256:<hex>"."""
    return "sha256:" + file_sha256(path)

def load_run_model(ref):
    """Loads a model to evaluate; one from a run folder must hold the weights its run recorded.

    A model.keras that was replaced or changed after training (another run's
    file copied in, a damaged copy) would be scored under the run's name and
    manifest; it is refused instead.

    Args:
        ref: a ModelRef.

    Raises:
        EvalError: the weights differ from the run's record.
    """
    from prednet_keras.formats.keras_files import load_model
    from prednet_keras.models.starting_point import weights_checksum

    model = load_model(ref.path, compile=False)
    if ref.run_folder is None:
        return model
    recorded = run_folders.RunFolder(ref.run_folder).recorded_model_checksum()
    if recorded is not None:
        expected, where = recorded
        actual = weights_checksum(model)
        if actual != expected:
            raise EvalError(
                f"{ref.path} does not hold the weights its run recorded ({where} {expected[:12]}..., the file "
                f"holds {actual[:12]}...): it was replaced or changed after training, so it is not scored."
            )
    return model
