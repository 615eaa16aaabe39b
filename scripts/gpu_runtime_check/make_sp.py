# Saves the starting points the GPU check loads (run here, in a fresh process).
import sys, os
sys.path.insert(0, os.getcwd())
from prednet_keras.models import save_initial_weights
from tests.runtime import child_tasks as ct
for name in ("conv_dense", "prednet", "autoencoder"):
    print(name, save_initial_weights(ct.MODELS[name](), f"out/sp/{name}.h5", ct.SEED))
