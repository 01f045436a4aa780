"""The app as an emulated ZeroGPU Space (`zerogpu_emulation`): `python tests/zerogpu_space.py PORT`, with the
environment of `zerogpu_emulation.space_env`. Blocks serving, as `python app.py` does on a Space."""

import sys

import zerogpu_fork  # noqa: F401 - first, and imported to the end, before `spaces`

# isort: split
import spaces  # noqa: F401,E402 - patches torch in this, the main thread, as on a Space

from zerogpu_emulation import skip_device_start  # noqa: E402

skip_device_start()

from eagle_demo.app import build_app, launch_options  # noqa: E402

demo = build_app()  # loads the EAGLE_ZEROGPU_PAIRS pairs here, in the main thread
demo.launch(server_name="127.0.0.1", server_port=int(sys.argv[1]), quiet=True, **launch_options())
