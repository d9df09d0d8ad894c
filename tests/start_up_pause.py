"""Run ``harness`` paused at one instant of its start-up, for the interrupt tests.

    python start_up_pause.py MARKER RELEASE INSTANT harness-args...

INSTANT is ``import:<module>`` (paused inside the import of a library module: the moment the
module's top-level code imports ``<module>``), ``build`` (the reference model is being loaded),
``export`` (inside ``torch.onnx.export``, while the tracer runs the model's forward) or
``session`` (an ONNX Runtime session is about to be created). At that instant the process writes
MARKER (the event the test waits for) and waits until RELEASE exists, so a signal the test sends
lands exactly there, however loaded the machine is.
"""

from __future__ import annotations

import pathlib
import sys
import time
from typing import Any

marker, release, instant = sys.argv[1:4]
del sys.argv[1:4]
sys.argv[0] = "harness"  # the console script's name: the start-up handler is installed as for it


def pause(name: str) -> None:
    pathlib.Path(marker).write_text(name)
    while not pathlib.Path(release).exists():
        time.sleep(0.01)


if instant.startswith("import:"):
    wanted = instant.split(":", 1)[1]
    paused: list[str] = []

    def audit(event: str, args: tuple[Any, ...]) -> None:
        if event == "import" and args[0] == wanted and not paused:
            paused.append(wanted)
            pause(instant)

    sys.addaudithook(audit)

from harness.cli import entrypoint  # noqa: E402  (after the hook: the harness's own imports count too)

if instant == "build":
    import harness.zoo.loading as loading

    real_load = loading.load_model

    def load_model(*args: Any, **kwargs: Any) -> Any:
        pause("build")
        return real_load(*args, **kwargs)

    loading.load_model = load_model  # type: ignore[assignment]
elif instant == "export":
    import torch

    real_export = torch.onnx.export
    state = {"exporting": False, "paused": False}

    def forward_hook(module: Any, args: Any, output: Any) -> None:
        if state["exporting"] and not state["paused"]:
            state["paused"] = True
            pause("export")

    torch.nn.modules.module.register_module_forward_hook(forward_hook)

    def export(*args: Any, **kwargs: Any) -> Any:
        state["exporting"] = True
        try:
            return real_export(*args, **kwargs)
        finally:
            state["exporting"] = False

    torch.onnx.export = export
elif instant == "session":
    import onnxruntime

    real_init = onnxruntime.InferenceSession.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        pause("session")
        real_init(self, *args, **kwargs)

    onnxruntime.InferenceSession.__init__ = init  # type: ignore[method-assign]
entrypoint()
