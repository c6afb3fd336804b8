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
    "mnist_cnn_pytorch.onnx": "04_quantize_and_benchmark.ipynb",
}


def run_notebook(name: str, timeout: int = 3600) -> None:
    """Execute ``notebooks/<name>`` top to bottom in a new kernel; raise if any cell fails."""
    import nbclient
    import nbformat

    path = NOTEBOOKS / name
    if not path.is_file():
        raise FileNotFoundError(f"no notebook {path}")
    nb = nbformat.read(path, as_version=4)
    # "python3" is the kernel of the environment running this code (ipykernel's own spec).
    client = nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOKS)}})
    t0 = time.perf_counter()
    print(f"running {name} to rebuild what it writes ...", flush=True)
    client.execute()
    print(f"... {name} finished in {time.perf_counter() - t0:.0f} s", flush=True)


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


def series() -> list[Path]:
    """The notebooks of the series, in order (``NN_verb_object.ipynb``)."""
    return sorted(p for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def main() -> int:
    """``make run``: execute every notebook of the series in order, headlessly."""
    for path in series():
        run_notebook(path.name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
