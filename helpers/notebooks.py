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
    """Run a notebook top to bottom in a fresh kernel (cwd = its folder); raise if any cell fails.

    Returns ``(executed notebook, wall seconds)``. ``"python3"`` is the kernel of the environment running
    this code (ipykernel's own spec).
    """
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


def require_artifact(filename: str) -> Path:
    """Path of ``artifacts/<filename>``, running the notebook that produces it if it is missing."""
    path = artifacts_dir() / filename
    if path.exists():
        return path
    if filename not in PRODUCERS:
        raise FileNotFoundError(f"{path} is missing and no notebook is registered to produce it "
                                f"(known: {sorted(PRODUCERS)})")
    print(f"{path.name} is missing.", file=sys.stderr)
    run_notebook(PRODUCERS[filename])
    if not path.exists():
        raise FileNotFoundError(f"{PRODUCERS[filename]} ran but did not write {path}")
    return path


SERIES_GLOB = "[0-9][0-9]_*.ipynb"


def series(notebooks_dir: Path = NOTEBOOKS) -> list[Path]:
    """The notebooks of the series, in order (``NN_verb_object.ipynb``)."""
    return sorted(Path(notebooks_dir).glob(SERIES_GLOB))
