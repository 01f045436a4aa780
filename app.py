"""EAGLE Playground: `python app.py` (and the Hugging Face Spaces entry point).

Builds the page without loading any model; the shipped tiny pair loads on Load or on the first Generate.
"""

import os
import sys

if "--public" in sys.argv[1:]:  # public mode (eagle_demo/app/public.py; on by default on a Space)
    os.environ["EAGLE_PUBLIC"] = "1"
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

from eagle_demo.app import build_app, launch_options  # noqa: E402

demo = build_app()

if __name__ == "__main__":
    demo.launch(**launch_options())  # build_app has set up the queue (one run at a time, 32 waiting)
