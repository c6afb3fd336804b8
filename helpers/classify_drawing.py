"""Classify drawings of any size (PNG, e.g. a canvas export) with an MNIST ``.onnx`` file (notebook 04).

``helpers/predict.py`` (notebook 03) with the page's preprocessing in front: each drawing is read as gray pixels
(dark strokes on light or transparent paper, or light strokes on dark), made into the 28x28 input MNIST models
expect by ``helpers/preprocess.py`` (the twin of ``web/preprocess.js``: ink, crop, scale to 20 px, centre of
mass), then checked, run and reported by predict.py, with its exit codes. Needs the repository on the path (it
imports both modules); ``web/classify.mjs --preprocess mnist`` is its Node.js twin.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from helpers import predict
from helpers.preprocess import FIELD_SIDE, DrawingError, find_ink, mnist_preprocess

# drawings of any size up to this a side (checked from the PNG header, before decoding)
MAX_DRAWING_SIDE = 4096

EXIT_CODES_HELP = """exit codes (as python -m helpers.predict):
  0  every drawing was classified
  2  usage error (bad or missing command-line arguments, or --invert: the ink is found from the paper)
  3  model error: the model file is missing, not a valid ONNX model, not a 28x28 image classifier
  4  input error: a drawing is missing, unreadable, corrupt, larger than 4096 pixels a side, empty
     (no ink, or fully transparent) or ambiguous (mid-gray paper, light and dark strokes on transparency)

example:
  python -m helpers.classify_drawing artifacts/mnist_cnn_pytorch.onnx canvas.png --json
"""


def read_drawings(paths: list[str]) -> tuple[list[np.ndarray], list[str]]:
    """Gray drawings in 0..1 (a PNG of any size, or a .npy of 28x28 images) and a source name for each."""
    drawings, sources = [], []
    for path in paths:
        data = predict.read_bytes(path)
        if data.startswith(predict.PNG_SIGNATURE):
            drawings.append(predict.decode_png(data, path, max_side=MAX_DRAWING_SIDE))
            sources.append(path)
        elif data.startswith(predict.NPY_SIGNATURE):
            images = predict.decode_npy(data, path, (FIELD_SIDE, FIELD_SIDE))
            drawings += list(images)
            sources += [f"{path}[{i}]" for i in range(len(images))]
        else:
            raise predict.InputError(
                f"{path}: neither a PNG image nor a .npy array (unrecognised content)"
            )
    return drawings, sources


def main(argv: list[str] | None = None) -> int:
    """The command line: exit 0 ok, 2 usage (argparse), 3 model, 4 input."""
    parser = argparse.ArgumentParser(
        prog="python -m helpers.classify_drawing",
        description="Classify drawings of any size (dark on light or transparent, or light on dark) with an\n"
        "MNIST .onnx model: each is made into 28x28 as MNIST was (crop to the ink, longest side 20 px,\n"
        "centre of mass at the centre), then classified by helpers/predict.py.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("model", help="the .onnx file (input [batch, 1, 28, 28] float)")
    parser.add_argument(
        "images",
        nargs="+",
        metavar="DRAWING",
        help="PNG files of any size (or .npy arrays of 28x28 images)",
    )
    # predict.py's option, refused here with the reason
    parser.add_argument("--invert", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--json", action="store_true", help="print JSON (all probabilities) instead of text"
    )
    parser.add_argument(
        "--threads", type=int, default=None, metavar="N", help="onnxruntime intra-op threads"
    )
    args = parser.parse_args(argv)
    if args.invert:
        parser.error(
            "the ink is found from the paper (dark on light or light on dark): drop --invert"
        )
    if args.threads is not None and args.threads < 1:
        parser.error(f"--threads must be at least 1, got {args.threads}")
    try:
        session, spec = predict.load_model(args.model, args.threads)
        if (spec.height, spec.width) != (FIELD_SIDE, FIELD_SIDE):
            raise predict.ModelError(
                f"drawings are made into {FIELD_SIDE}x{FIELD_SIDE} images; the model expects "
                f"{spec.width}x{spec.height}"
            )
        drawings, sources = read_drawings(args.images)
        images = np.stack(
            [mnist_preprocess(find_ink(d, s), name=s) for d, s in zip(drawings, sources)]
        )
        predict.check_inputs(images, sources)
        probabilities = predict.predict(session, spec, images)
    except (predict.ModelError, predict.InputError, DrawingError) as err:
        print(f"error: {err}", file=sys.stderr)
        return predict.EXIT_MODEL if isinstance(err, predict.ModelError) else predict.EXIT_INPUT
    print(predict.format_output(str(args.model), spec, sources, probabilities, args.json))
    return predict.EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
