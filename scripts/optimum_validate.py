"""optimum's own output validation of an export in its layout, run in optimum's environment.

    /work/venv-optimum/bin/python scripts/optimum_validate.py MODEL_DIR EXPORT_DIR [--task TASK]

What ``optimum-cli export onnx`` runs after exporting (``validate_models_outputs`` on every
sub-model, with its default dummy shapes and tolerance), on files that already exist: the peer
``scripts/bench_check.py`` times ``harness check`` against. Imports optimum, so it runs only in a
venv that has it (optimum-onnx pins transformers 4.57); prints one JSON line with the verdict.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def main() -> int:
    started = time.perf_counter()
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("export")
    parser.add_argument("--task", default="text2text-generation-with-past")
    args = parser.parse_args()
    from optimum.exporters.onnx.convert import _get_submodels_and_onnx_configs, validate_models_outputs
    from optimum.exporters.tasks import TasksManager
    from optimum.utils import DEFAULT_DUMMY_SHAPES

    model = TasksManager.get_model_from_task(args.task, args.model, framework="pt", library_name="transformers")
    model.eval()
    _, configs = _get_submodels_and_onnx_configs(
        model=model, task=args.task, monolith=False, custom_onnx_configs={}, custom_architecture=False,
        float_dtype="fp32", fn_get_submodels=None, preprocessors=None, _variant="default",
        library_name="transformers", model_kwargs=None)
    files = [f"{name}.onnx" for name in configs]
    outputs = [list(config.outputs.keys()) for _, config in configs.values()]
    verdict, reason = "pass", ""
    try:
        validate_models_outputs(models_and_onnx_configs=configs, onnx_named_outputs=outputs,
                                output_dir=Path(args.export), atol=None, onnx_files_subpaths=files,
                                input_shapes=dict(DEFAULT_DUMMY_SHAPES), device="cpu", use_subprocess=False)
    except Exception as exc:  # noqa: BLE001 - optimum raises ShapeError / AtolError / OutputMatchError: its "fail"
        verdict, reason = "fail", f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    print(json.dumps({"verdict": verdict, "reason": reason, "files": files,
                      "wall_s": round(time.perf_counter() - started, 3)}))
    return 0 if verdict == "pass" else 1


if __name__ == "__main__":
    sys.exit(main())
