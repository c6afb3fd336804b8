"""Time notebook 02's Keras MLP beside ONNX Runtime in a process of its own: ``python -m helpers.keras_timing``."""

from __future__ import annotations

import argparse
import json
import os
import sys


def dense_weights(model) -> list:
    """[W [in, out], b [out]] of each MatMul + Add pair, in graph order."""
    from onnx import numpy_helper

    constants = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    arrays = []
    for node in model.graph.node:
        if node.op_type == "MatMul" and node.input[1] in constants:
            arrays.append(constants[node.input[1]])
        elif node.op_type == "Add" and len(arrays) % 2 == 1:  # the bias right after a MatMul
            arrays.append(next(constants[name] for name in node.input if name in constants))
    return arrays


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m helpers.keras_timing", description=__doc__)
    parser.add_argument("model", help="the Keras MLP's .onnx file (artifacts/mnist_mlp_keras.onnx)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 256])
    parser.add_argument("--min-time-s", type=float, default=0.4)
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # quiet TensorFlow's CUDA-not-found lines

    import keras
    import numpy as np
    import onnx
    import tensorflow as tf

    from helpers.data.mnist import load_mnist
    from helpers.lessons import MNIST_MEAN, MNIST_STD
    from helpers.measure.bandwidth import engine_session
    from helpers.measure.side_by_side import onnxruntime_predict, time_side_by_side

    tf.config.threading.set_intra_op_parallelism_threads(
        args.threads
    )  # the notebook's thread count
    tf.config.threading.set_inter_op_parallelism_threads(1)
    arrays = dense_weights(onnx.load(args.model))
    model = keras.Sequential(
        [
            keras.Input(shape=(1, 28, 28)),
            keras.layers.Rescaling(1 / MNIST_STD, offset=-MNIST_MEAN / MNIST_STD),
            keras.layers.Flatten(),
        ]
        + [keras.layers.Dense(w.shape[1], activation="relu") for w in arrays[0:-2:2]]
        + [keras.layers.Dense(arrays[-2].shape[1])]
    )
    model.set_weights(arrays)

    data = load_mnist()
    x_test = data.x_test[:, None].astype(np.float32) / 255.0
    logits = model(x_test, training=False).numpy()
    session = engine_session(
        args.model, args.threads
    )  # the notebook's settings: operators in sequence, no spinning
    reference = session.run(None, {"image": x_test})[0]
    inputs = {
        b: tf.convert_to_tensor(x_test[:b]) for b in args.batch_sizes
    }  # converted before timing
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
    print(
        json.dumps(
            {
                "versions": {"tensorflow": tf.__version__, "keras": keras.__version__},
                "max_abs_diff_vs_onnxruntime": float(np.abs(logits - reference).max()),
                "accuracy": float((logits.argmax(1) == data.y_test).mean()),
                "size_bytes": int(sum(w.nbytes for w in arrays)),
                "latency_us": latency["keras"],
                "onnxruntime_fp32_latency_us": latency[
                    "onnxruntime"
                ],  # the same file, timed side by side with Keras
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
