"""Time notebook 02's Keras MLP beside ONNX Runtime in a process of its own: ``python -m helpers.keras_timing``.

Notebook 06 runs this command so that TensorFlow never shares a process with PyTorch. What it times is the
model notebook 02 trained and saved in Keras's own format (``model.save(".../mnist_mlp_keras.keras")``),
loaded with ``keras.saving.load_model``: not a copy rebuilt from the ONNX graph. The normalization travels
inside that model (its ``Rescaling`` layer), as the series' contract puts it inside every model file, so the
caller passes no constants and this plumbing never imports the lessons' code (``helpers.lessons``): the
Keras model and the ``.onnx`` file it is compared with take the same pixels in 0..1, and the parity printed
(``max_abs_diff_vs_onnxruntime``) shows that they compute the same thing.

Prints one line of JSON: versions, parity with ONNX Runtime, accuracy, size and both latencies.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

PRODUCER = "notebooks/02_export_keras_mlp.ipynb"
INPUT_SHAPE, OUTPUT_SHAPE = (None, 1, 28, 28), (None, 10)  # the series' contract: image -> logits


def load_keras_model(path: str | os.PathLike):
    """The Keras model saved at ``path``, checked: it loads and maps ``[batch, 1, 28, 28]`` to ``[batch, 10]``."""
    import keras

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no Keras model there; run {PRODUCER}, which saves it")
    try:
        model = keras.saving.load_model(path, compile=False)  # inference only: no optimizer
    except Exception as err:  # a truncated or foreign file: ValueError, OSError, BadZipFile...
        raise ValueError(
            f"{path}: Keras cannot load it ({type(err).__name__}: {err}); "
            f"run {PRODUCER} again to save it"
        ) from err
    shapes = (tuple(model.input_shape), tuple(model.output_shape))
    if shapes != (INPUT_SHAPE, OUTPUT_SHAPE):
        raise ValueError(
            f"{path}: expected a digit classifier {list(INPUT_SHAPE)} -> {list(OUTPUT_SHAPE)} "
            f"(None: any batch), got {list(shapes[0])} -> {list(shapes[1])}"
        )
    return model


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m helpers.keras_timing", description=__doc__)
    parser.add_argument("keras_model", help="notebook 02's Keras model (mnist_mlp_keras.keras)")
    parser.add_argument("onnx_model", help="the same model as ONNX (mnist_mlp_keras.onnx)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 256])
    parser.add_argument("--min-time-s", type=float, default=0.4)
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # quiet TensorFlow's CUDA-not-found lines

    import keras
    import numpy as np
    import tensorflow as tf

    from helpers.data.mnist import load_mnist
    from helpers.measure.bandwidth import engine_session
    from helpers.measure.side_by_side import onnxruntime_predict, time_side_by_side

    # the notebook's thread count, set before TensorFlow starts its thread pools (loading a model does)
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    try:
        model = load_keras_model(args.keras_model)
    except (FileNotFoundError, ValueError) as err:
        parser.exit(1, f"keras_timing: {err}\n")

    data = load_mnist()
    x_test = data.x_test[:, None].astype(np.float32) / 255.0
    logits = model(x_test, training=False).numpy()
    # the notebook's settings: operators in sequence, no spinning
    session = engine_session(args.onnx_model, args.threads)
    reference = session.run(None, {"image": x_test})[0]
    inputs = {b: tf.convert_to_tensor(x_test[:b]) for b in args.batch_sizes}  # before timing
    latency = time_side_by_side(
        {
            "keras": (lambda x: model(x, training=False), inputs),
            "onnxruntime": (
                onnxruntime_predict(session),
                {b: np.ascontiguousarray(x_test[:b]) for b in args.batch_sizes},
            ),
        },
        min_time_s=args.min_time_s,
    )
    result = {
        "versions": {"tensorflow": tf.__version__, "keras": keras.__version__},
        "max_abs_diff_vs_onnxruntime": float(np.abs(logits - reference).max()),
        "accuracy": float((logits.argmax(1) == data.y_test).mean()),
        "size_bytes": int(sum(w.nbytes for w in model.get_weights())),
        "latency_us": latency["keras"],
        "onnxruntime_fp32_latency_us": latency["onnxruntime"],  # timed side by side with Keras
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
