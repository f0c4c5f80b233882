"""nbval runs the stored chapters on the planted model, whatever the caller's environment says."""

import os

os.environ["CONTEXT_NEURONS_MODEL"] = "planted"
os.environ["CONTEXT_NEURONS_THREADS"] = "2"
