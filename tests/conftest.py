import os

# Quiet TensorFlow's start-up logging in test output; set before any import of it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
