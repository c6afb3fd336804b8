"""Rebuild an artifact by running the notebook that makes it.

Any notebook can be run alone: when it needs a file an earlier notebook writes (for example
``artifacts/mnist_mlp_pytorch.onnx`` from notebook 01), ``require_artifact`` runs that earlier
notebook headlessly in a fresh kernel of the same environment. No training code is written twice.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

from helpers.paths import NOTEBOOKS, artifacts_dir

# artifact file name -> the notebook that writes it
PRODUCERS: dict[str, str] = {
    "mnist_mlp_pytorch.onnx": "01_export_pytorch_mlp.ipynb",
    "mnist_mlp_keras.onnx": "02_export_keras_mlp.ipynb",
    "mnist_cnn_pytorch.onnx": "05_quantize_models.ipynb",
    **{f"quantized/mnist_{model}.{precision}.onnx": "05_quantize_models.ipynb"
       for model in ("mlp_pytorch", "mlp_keras", "cnn_pytorch")
       for precision in ("fp16", "int8-dynamic", "int8-static", "int4-weights")},
}


def execute_notebook(path: Path, kernel_name: str = "python3", timeout: int = 3600):
    """``(executed notebook, wall seconds)`` of a run in a fresh kernel of this environment, cwd = its folder."""
    import nbclient
    import nbformat

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no notebook {path}")
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=timeout, kernel_name=kernel_name,
                                     resources={"metadata": {"path": str(path.parent)}})
    t0 = time.perf_counter()
    client.execute()
    return nb, time.perf_counter() - t0


def run_notebook(name: str, timeout: int = 3600) -> None:
    """Execute ``notebooks/<name>`` headlessly (to rebuild what it writes), reporting its run time."""
    import nbclient.exceptions

    print(f"running {name} to rebuild what it writes ...", flush=True)
    try:
        _, seconds = execute_notebook(NOTEBOOKS / name, timeout=timeout)
    except nbclient.exceptions.CellExecutionError as err:  # its message holds the failing cell and traceback
        raise RuntimeError(f"{name} failed while rebuilding what it writes (open it and run it to fix "
                           f"it):\n{err}") from err
    print(f"... {name} finished in {seconds:.0f} s", flush=True)


def loads(path: Path) -> str | None:
    """``None`` when ONNX Runtime can open the model at ``path``, else why not (missing, truncated, not ONNX)."""
    import onnxruntime as ort

    if not path.is_file():
        return "it is missing"
    try:
        ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except Exception as err:  # onnxruntime raises its own exception types for a file it cannot load
        return f"ONNX Runtime cannot load it ({type(err).__name__}: {str(err).splitlines()[0][:200]})"
    return None


def require_artifact(filename: str) -> Path:
    """Path of ``artifacts/<filename>``, a model that loads: when it is missing, or half-written by an
    interrupted save (it does not load), the notebook that produces it runs first."""
    path = artifacts_dir() / filename
    if filename not in PRODUCERS:
        if path.exists():
            return path
        raise FileNotFoundError(f"{path} is missing and no notebook is registered to produce it "
                                f"(known: {sorted(PRODUCERS)})")
    problem = loads(path)
    if problem is None:
        return path
    print(f"{path.name}: {problem}.", file=sys.stderr)
    run_notebook(PRODUCERS[filename])
    problem = loads(path)
    if problem is not None:
        raise FileNotFoundError(f"{PRODUCERS[filename]} ran but {path}: {problem}")
    return path


SERIES_GLOB = "[0-9][0-9]_*.ipynb"


def notebook_paths(notebooks_dir: Path = NOTEBOOKS) -> list[Path]:
    """The notebooks of the series, in order (``NN_verb_object.ipynb``)."""
    return sorted(Path(notebooks_dir).glob(SERIES_GLOB))
