"""helpers/predict.py: PNG reading (Pillow, against a hand-written encoder), .npy reading, model validation, predictions and the CLI's exit codes;
helpers/classify_drawing.py's refusals beside it (its drawings are tested in tests/test_web.py)."""

from __future__ import annotations

import ast
import json
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

# writes PNG files for the command-line tests (the PNG-reading tests use encode_png)
from PIL import (
    Image,
)

from helpers import classify_drawing as CD
from helpers import predict as P
from helpers import preprocess as D
from helpers.data.mnist import load_mnist
from helpers.data.paths import REPO_ROOT
from helpers.pipeline.artifacts import existing_artifact

PREDICT_PY = REPO_ROOT / "helpers" / "predict.py"


# ------------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def digits():
    """Real MNIST test digits (uint8 [32, 28, 28]) and labels."""
    mnist = load_mnist()
    return mnist.x_test[:32], mnist.y_test[:32]


def linear_model(
    path: Path, input_shape=("batch", 1, 28, 28), n_inputs=1, output_shape=("batch", 10)
) -> Path:
    """A tiny valid classifier: Flatten -> MatMul, for any declared input and output shape."""
    # values per item
    rows = int(np.prod([d if isinstance(d, int) else 28 for d in input_shape[1:]]))
    weight = numpy_helper.from_array(
        np.random.default_rng(0).normal(size=(rows, 10)).astype(np.float32), "w"
    )
    inputs = [
        helper.make_tensor_value_info(
            f"x{i}" if i else "pixels", TensorProto.FLOAT, list(input_shape)
        )
        for i in range(n_inputs)
    ]
    nodes = [
        helper.make_node("Flatten", ["pixels"], ["flat"], axis=1),
        helper.make_node("MatMul", ["flat", "w"], ["scores"]),
    ]
    output = helper.make_tensor_value_info("scores", TensorProto.FLOAT, list(output_shape))
    model = helper.make_model(
        helper.make_graph(nodes, "tiny", inputs, [output], initializer=[weight]),
        opset_imports=[helper.make_opsetid("", 17)],
        ir_version=9,
    )
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return linear_model(tmp_path_factory.mktemp("models") / "linear.onnx")


@pytest.fixture(scope="module")
def mnist_model():
    return str(existing_artifact("mnist_mlp_pytorch.onnx"))  # built by `make artifacts`


# ------------------------------------------------------------------- an independent PNG encoder
# Written from the PNG specification (W3C, 2003), without Pillow: what helpers.predict reads with Pillow is compared
# with the pixels given here, so a mistake in either shows up.
PNG_SIGNATURE = bytes([137, 80, 78, 71, 13, 10, 26, 10])
ADAM7 = [
    (0, 0, 8, 8),
    (4, 0, 8, 8),
    (0, 4, 4, 8),
    (2, 0, 4, 4),
    (0, 2, 2, 4),
    (1, 0, 2, 2),
    (0, 1, 1, 2),
]


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else (b if pb <= pc else c)


def png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def _filter_row(kind: int, row: bytes, prev: bytes, bpp: int) -> bytes:
    out = bytearray(len(row))
    for x, value in enumerate(row):
        left = row[x - bpp] if x >= bpp else 0
        up = prev[x]
        up_left = prev[x - bpp] if x >= bpp else 0
        predictor = [0, left, up, (left + up) >> 1, _paeth(left, up, up_left)][kind]
        out[x] = (value - predictor) & 0xFF
    return bytes(out)


def _scanlines(samples: np.ndarray, depth: int, filters) -> bytes:
    """The filtered rows of one (sub-)image: a filter-type byte, then the row's bytes."""
    height, width, channels = samples.shape
    if depth == 16:
        rows = samples.astype(">u2").reshape(height, -1).view(np.uint8)
    elif depth < 8:
        bits = (
            ((samples[..., 0][..., None] >> np.arange(depth - 1, -1, -1)) & 1)
            .astype(np.uint8)
            .reshape(height, -1)
        )
        rows = np.packbits(bits, axis=1)
    else:
        rows = samples.astype(np.uint8).reshape(height, -1)
    bpp = max(1, channels * depth // 8)
    raw, prev = bytearray(), bytes(rows.shape[1])
    for y in range(height):
        kind = filters[y % len(filters)]
        raw += bytes([kind]) + _filter_row(kind, rows[y].tobytes(), prev, bpp)
        prev = rows[y].tobytes()
    return bytes(raw)


def encode_png(
    samples: np.ndarray,
    color: int,
    depth: int = 8,
    filters=(0, 1, 2, 3, 4),
    palette=None,
    transparency: bytes | None = None,
    interlace: int = 0,
) -> bytes:
    """PNG bytes for samples [H, W, C] (uint8/uint16), cycling through the given filter types row by row;
    ``transparency``: a tRNS chunk's body; ``interlace=1``: Adam7, seven passes over sub-images."""
    height, width, _ = samples.shape
    if interlace:
        passes = [samples[y0::dy, x0::dx] for x0, y0, dx, dy in ADAM7]
        raw = b"".join(_scanlines(p, depth, filters) for p in passes if p.size)
    else:
        raw = _scanlines(samples, depth, filters)
    out = PNG_SIGNATURE + png_chunk(
        b"IHDR", struct.pack(">IIBBBBB", width, height, depth, color, 0, 0, interlace)
    )
    if palette is not None:
        out += png_chunk(b"PLTE", palette.astype(np.uint8).tobytes())
    if transparency is not None:
        out += png_chunk(b"tRNS", transparency)
    return out + png_chunk(b"IDAT", zlib.compress(raw)) + png_chunk(b"IEND", b"")


def luma(rgb: np.ndarray) -> np.ndarray:
    """ITU-R 601 grey of integer RGB [..., 3] (the weights of Pillow's "L" and web/preprocess.js)."""
    rgb = rgb.astype(np.int64)
    return (rgb[..., 0] * 19595 + rgb[..., 1] * 38470 + rgb[..., 2] * 7471 + 0x8000) >> 16


# ----------------------------------------------------------------------------------- PNG reading
@pytest.mark.parametrize(
    "filters", [(0,), (1,), (2,), (3,), (4,), (0, 1, 2, 3, 4)], ids=lambda f: f"filters{f}"
)
@pytest.mark.parametrize("color,channels", [(0, 1), (2, 3), (4, 2), (6, 4)])
def test_png_every_filter_and_colour_type_decodes_exactly(digits, filters, color, channels):
    gray = digits[0][0]
    opaque = np.full_like(gray, 255)
    samples = np.stack(
        {0: [gray], 2: [gray] * 3, 4: [gray, opaque], 6: [gray] * 3 + [opaque]}[color], axis=-1
    )
    np.testing.assert_array_equal(
        P.decode_png(encode_png(samples, color, filters=filters), "d.png", (28, 28)),
        gray / np.float32(255),
    )


def test_png_colour_is_read_as_itu_601_grey():
    rgb = np.random.default_rng(3).integers(0, 256, size=(28, 28, 3), dtype=np.uint8)
    np.testing.assert_allclose(
        P.decode_png(encode_png(rgb, 2), "rgb.png", (28, 28)), luma(rgb) / 255, atol=1e-6
    )


def test_png_16_bit_and_sub_byte_depths(digits):
    gray = digits[0][1]
    png = encode_png((gray.astype(np.uint16) * 257)[..., None], 0, depth=16)
    np.testing.assert_allclose(P.decode_png(png, "d16.png", (28, 28)), gray / 255.0, atol=1e-6)
    fine = np.arange(28 * 28, dtype=np.uint16).reshape(28, 28, 1) * 83  # values no 8 bits can hold
    np.testing.assert_allclose(
        P.decode_png(encode_png(fine, 0, depth=16), "fine.png", (28, 28)), fine[..., 0] / 65535
    )
    opaque = np.full_like(gray, 255)
    for color, planes in [(2, [gray] * 3), (4, [gray, opaque]), (6, [gray] * 3 + [opaque])]:
        samples = np.stack(planes, axis=-1).astype(np.uint16) * 257
        np.testing.assert_allclose(
            P.decode_png(encode_png(samples, color, depth=16), f"c{color}.png", (28, 28)),
            gray / 255.0,
            atol=1e-6,
        )
    for depth in (1, 2, 4):
        levels = (1 << depth) - 1
        quantized = (gray.astype(np.int64) * levels // 255).astype(np.uint8)
        png = encode_png(quantized[..., None], 0, depth=depth)
        np.testing.assert_allclose(
            P.decode_png(png, f"d{depth}.png", (28, 28)), quantized / levels, atol=1e-6
        )


def test_png_palette_with_sub_byte_indices():
    palette = np.array([[0, 0, 0], [255, 255, 255], [255, 0, 0], [0, 0, 255]])
    index = np.random.default_rng(1).integers(0, 4, size=(28, 28)).astype(np.uint8)
    png = encode_png(index[..., None], 3, depth=2, palette=palette)
    np.testing.assert_allclose(
        P.decode_png(png, "p.png", (28, 28)), luma(palette[index]) / 255, atol=1e-6
    )


def test_png_transparency_chunks_of_palette_and_grey_images(digits):
    """A tRNS chunk (a palette's alpha, or one grey value marked transparent) is transparency like an alpha channel."""
    strokes = digits[0][0] > 127  # white strokes on a background that is made transparent
    expected = strokes.astype(np.float32)  # light ink on transparent: read over black
    palette = np.array([[0, 0, 0], [255, 255, 255]])
    index = strokes.astype(np.uint8)[..., None]
    for depth in (1, 8):
        png = encode_png(index, 3, depth=depth, palette=palette, transparency=b"\x00")
        np.testing.assert_array_equal(P.decode_png(png, f"pa{depth}.png", (28, 28)), expected)
    for depth, white in [(8, 255), (16, 65535)]:
        png = encode_png(
            index.astype(np.uint16) * white, 0, depth=depth, transparency=struct.pack(">H", 0)
        )
        np.testing.assert_array_equal(P.decode_png(png, f"ga{depth}.png", (28, 28)), expected)
    # dark strokes on a transparent background read as on white paper, as without the chunk
    png = encode_png(1 - index, 3, depth=8, palette=palette, transparency=b"\xff\x00")
    np.testing.assert_array_equal(P.decode_png(png, "dark.png", (28, 28)), 1 - expected)


def test_png_interlaced_reads_like_the_plain_file(digits):
    gray = digits[0][2]
    for color, planes in [(0, [gray]), (2, [gray] * 3), (4, [gray, np.full_like(gray, 255)])]:
        png = encode_png(np.stack(planes, axis=-1), color, interlace=1)
        np.testing.assert_array_equal(P.decode_png(png, "i.png", (28, 28)), gray / np.float32(255))


def test_png_alpha_is_composited_over_black(tmp_path):
    alpha = np.tile(np.linspace(0, 255, 28).astype(np.uint8), (28, 1))
    png = encode_png(np.dstack([np.full((28, 28, 3), 200, np.uint8), alpha]), 6)
    expected = np.round(200 * alpha.astype(np.int64) / 255) / 255
    np.testing.assert_allclose(P.decode_png(png, "a.png", (28, 28)), expected, atol=1 / 255 + 1e-6)


def test_png_corrupt_inputs_raise_input_error_naming_the_problem(digits):
    good = encode_png(digits[0][0][..., None], 0)
    idat = good.index(b"IDAT")  # the chunk type; its length is the 4 bytes before it
    before_idat = good[: idat - 4]
    raw = zlib.decompress(good[idat + 4 : good.index(b"IEND") - 8])  # the filtered rows
    bad_filter = bytes([9]) + raw[1:]  # a filter type PNG does not have
    cases = {
        "signature": (b"GIF89a" + good[6:], "not a readable PNG"),
        "truncated": (good[: len(good) // 2], "corrupt or truncated PNG"),
        "no-iend": (good[: good.index(b"IEND") - 4], "corrupt or truncated PNG"),
        "crc": (
            good[: idat + 10] + bytes([good[idat + 10] ^ 0xFF]) + good[idat + 11 :],
            "checksum",
        ),
        "size": (
            encode_png(np.zeros((32, 30, 1), np.uint8), 0),
            "image is 30x32 pixels; the model expects 28x28",
        ),
        "signature-only": (PNG_SIGNATURE, "not a readable PNG"),
        # a colour type / depth combination PNG forbids (RGB at 4 bits), with a valid CRC
        "unsupported": (
            PNG_SIGNATURE + png_chunk(b"IHDR", struct.pack(">IIBBBBB", 28, 28, 4, 2, 0, 0, 0)),
            "not a readable PNG",
        ),
        # valid chunks, but the compressed stream is garbage
        "zlib": (
            before_idat + png_chunk(b"IDAT", b"garbage!") + png_chunk(b"IEND", b""),
            "corrupt or truncated PNG",
        ),
        "filter": (
            before_idat + png_chunk(b"IDAT", zlib.compress(bad_filter)) + png_chunk(b"IEND", b""),
            "corrupt or truncated PNG",
        ),
        # pixel data that ends after a third of the rows
        "short-data": (
            before_idat
            + png_chunk(b"IDAT", zlib.compress(raw[: len(raw) // 3]))
            + png_chunk(b"IEND", b""),
            "corrupt or truncated PNG",
        ),
    }
    for name, (data, message) in cases.items():
        with pytest.raises(P.InputError, match=f"{name}.png: .*" + message.replace("(", r"\(")):
            P.decode_png(data, f"{name}.png", (28, 28))


def _header_only(width: int, height: int) -> bytes:
    """A PNG whose header declares ``width`` x ``height`` grey pixels, with no pixel data behind it."""
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        PNG_SIGNATURE
        + png_chunk(b"IHDR", header)
        + png_chunk(b"IDAT", zlib.compress(b""))
        + png_chunk(b"IEND", b"")
    )


def _no_decoding(monkeypatch):
    """Make any pixel decoding by Pillow fail the test."""
    from PIL import ImageFile

    def refuse(self):
        raise AssertionError("Pillow decoded pixels of an image that should be refused first")

    monkeypatch.setattr(ImageFile.ImageFile, "load", refuse)


def test_png_size_is_checked_before_decompressing(monkeypatch):
    _no_decoding(monkeypatch)
    # header-only files: refused from the header alone, without allocating anything
    with pytest.raises(P.InputError, match="5000x3000 pixels; the model expects 28x28"):
        P.decode_png(_header_only(5000, 3000), "big.png", (28, 28))
    with pytest.raises(P.InputError, match="5000x3000 pixels; expected at most 4096x4096"):
        P.decode_png(_header_only(5000, 3000), "big.png", max_side=4096)
    with pytest.raises(P.InputError, match="huge.png: refused before decoding.*400000000 pixels"):
        P.decode_png(_header_only(20000, 20000), "huge.png", max_side=None)


def test_a_decompression_bomb_is_refused_before_decoding(monkeypatch):
    """A real bomb: 100 MB of pixels in about 100 kB. Pillow's own limit (MAX_IMAGE_PIXELS) refuses it unasked."""
    side = 10_000  # 1e8 pixels: over Image.MAX_IMAGE_PIXELS, where Pillow only warns; refused all the same
    squeeze = zlib.compressobj(9)
    row = bytes(side + 1)  # filter type 0, then black pixels
    idat = b"".join(squeeze.compress(row) for _ in range(side)) + squeeze.flush()
    bomb = _header_only(side, side) + png_chunk(b"IDAT", idat) + png_chunk(b"IEND", b"")
    assert len(bomb) < 200_000
    _no_decoding(monkeypatch)
    with pytest.raises(P.InputError, match="bomb.png: refused before decoding"):
        P.decode_png(bomb, "bomb.png", max_side=None)


# ------------------------------------------------------------------------------------------- .npy
@pytest.mark.parametrize("shape", [(28, 28), (5, 28, 28), (5, 1, 28, 28)])
def test_npy_accepted_shapes_and_dtypes(tmp_path, digits, shape):
    n = int(np.prod(shape)) // 784
    images = digits[0][:n].reshape(shape)
    np.save(tmp_path / "u8.npy", images)
    np.save(tmp_path / "f32.npy", images.astype(np.float32) / 255)
    expected = digits[0][:n].astype(np.float32) / 255
    np.testing.assert_allclose(P.read_image_file(tmp_path / "u8.npy", (28, 28))[0], expected)
    np.testing.assert_allclose(P.read_image_file(tmp_path / "f32.npy", (28, 28))[0], expected)


@pytest.mark.parametrize(
    "array,message",
    [
        (np.zeros((3, 32, 32), np.uint8), r"shape \(3, 32, 32\); the model expects \(28, 28\)"),
        (np.zeros((3, 3, 28, 28), np.uint8), "shape"),
        (np.zeros((0, 28, 28), np.uint8), "holds no images"),
        (np.zeros((28, 28), np.int64), "dtype int64 is not supported"),
        (np.zeros((28, 28), bool), "dtype bool is not supported"),
        (
            np.full((28, 28), 255.0, np.float32),
            "float values range 255..255; expected finite values in 0..1",
        ),
        (np.full((28, 28), -0.5), "expected finite values in 0..1"),
        (np.full((28, 28), np.nan, np.float32), "range nan..nan; expected finite"),
    ],
    ids=["size", "channels", "empty", "int64", "bool", "scale", "negative", "nan"],
)
def test_npy_bad_arrays(tmp_path, array, message):
    np.save(tmp_path / "bad.npy", array)
    with pytest.raises(P.InputError, match=message):
        P.read_image_file(tmp_path / "bad.npy", (28, 28))


def test_npy_pickles_are_never_loaded(tmp_path):
    np.save(tmp_path / "obj.npy", np.array([{"not": "pixels"}], dtype=object), allow_pickle=True)
    with pytest.raises(P.InputError, match="not a readable .npy array"):
        P.read_image_file(tmp_path / "obj.npy", (28, 28))


def test_unrecognised_and_missing_files(tmp_path):
    (tmp_path / "note.txt").write_text("hello")
    with pytest.raises(P.InputError, match="neither a PNG image nor a .npy array"):
        P.read_image_file(tmp_path / "note.txt", (28, 28))
    with pytest.raises(P.InputError, match="image file not found"):
        P.read_image_file(tmp_path / "absent.png", (28, 28))
    (tmp_path / "cut.npy").write_bytes(b"\x93NUMPY\x01\x00")
    with pytest.raises(P.InputError, match="not a readable .npy array"):
        P.read_image_file(tmp_path / "cut.npy", (28, 28))


# -------------------------------------------------------------------------------------- the model
def test_inspect_session_reads_names_from_metadata(model_path):
    session, spec = P.load_model(model_path)
    assert spec == P.ModelSpec("pixels", "tensor(float)", None, 28, 28, "scores")


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"n_inputs": 2}, "one input"),
        ({"input_shape": ("batch", 784)}, r"shaped \[batch, 1, height, width\]"),
        ({"input_shape": ("batch", 3, 28, 28)}, "one grayscale channel"),
        ({"input_shape": ("batch", 1, "h", 28)}, "fixed height and width"),
        ({"input_shape": (4, 1, 28, 28)}, "fixed batch size of 4"),
        ({"output_shape": ("batch", 10, 1)}, r"shaped \[batch, classes\]"),
    ],
    ids=["two-inputs", "flat", "rgb", "dynamic-height", "batch-4", "output-rank"],
)
def test_models_outside_the_contract_are_refused(tmp_path, kwargs, message):
    with pytest.raises(P.ModelError, match=message):
        P.load_model(linear_model(tmp_path / "m.onnx", **kwargs))


def test_integer_input_model_is_refused(tmp_path):
    graph = helper.make_graph(
        [helper.make_node("Cast", ["pixels"], ["scores"], to=TensorProto.FLOAT)],
        "g",
        [helper.make_tensor_value_info("pixels", TensorProto.UINT8, ["batch", 1, 28, 28])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["batch", 1, 28, 28])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    onnx.save(model, tmp_path / "u8.onnx")
    with pytest.raises(P.ModelError, match="floating-point input"):
        P.load_model(tmp_path / "u8.onnx")


def test_unloadable_model_files(tmp_path, model_path):
    (tmp_path / "text.onnx").write_text("not a protobuf at all")
    data = model_path.read_bytes()
    (tmp_path / "cut.onnx").write_bytes(data[: len(data) // 3])
    for name, error in [
        ("absent", "model file not found"),
        ("text", "not a valid ONNX"),
        ("cut", "not a valid ONNX"),
    ]:
        with pytest.raises(P.ModelError, match=error):
            P.load_model(tmp_path / f"{name}.onnx")


def test_predict_matches_a_direct_session_run(model_path, digits):
    session, spec = P.load_model(model_path)
    images = digits[0].astype(np.float32) / 255
    probabilities = P.predict(session, spec, images)
    (logits,) = session.run(None, {"pixels": images[:, None]})
    assert probabilities.shape == (32, 10)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(probabilities.argmax(1), logits.argmax(1))
    with pytest.raises(P.InputError, match=r"expected images shaped \(N, 28, 28\)"):
        P.predict(session, spec, images[:, :20])


def test_fixed_batch_of_one_runs_image_by_image(tmp_path, digits):
    path = linear_model(tmp_path / "b1.onnx", input_shape=(1, 1, 28, 28), output_shape=(1, 10))
    session, spec = P.load_model(path)
    assert spec.batch == 1
    images = digits[0][:5].astype(np.float32) / 255
    reference = np.concatenate([session.run(None, {"pixels": im[None, None]})[0] for im in images])
    np.testing.assert_allclose(
        P.predict(session, spec, images), P.softmax(reference.astype(np.float64))
    )


def test_softmax_is_stable_for_large_logits():
    p = P.softmax(np.array([[1000.0, 0.0, -1000.0]]))
    assert np.isfinite(p).all() and p[0, 0] == pytest.approx(1.0)
    # the deployment's own softmax and the one the checkers use (helpers/preprocess.py) are the same function
    logits = np.random.default_rng(5).normal(scale=30, size=(64, 10))
    np.testing.assert_array_equal(P.softmax(logits), D.softmax(logits))


# --------------------------------------------------------------------------------- the program
def test_main_text_json_invert_and_exit_codes(tmp_path, model_path, digits, capsys):
    images = digits[0][:3]
    np.save(tmp_path / "batch.npy", images)
    Image.fromarray(images[0]).save(tmp_path / "one.png")
    Image.fromarray(255 - images[0]).save(tmp_path / "inverted.png")

    assert (
        P.main([str(model_path), str(tmp_path / "one.png"), str(tmp_path / "batch.npy")])
        == P.EXIT_OK
    )
    lines = capsys.readouterr().out.splitlines()
    sources = [str(tmp_path / "one.png")] + [f"{tmp_path / 'batch.npy'}[{i}]" for i in range(3)]
    assert [line.split()[0] for line in lines] == sources
    assert lines[0].split()[1] == lines[1].split()[1]  # the same digit as PNG and as .npy

    assert (
        P.main(
            [
                str(model_path),
                str(tmp_path / "inverted.png"),
                "--invert",
                "--json",
                "--threads",
                "1",
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["input"] == {"name": "pixels", "type": "tensor(float)", "height": 28, "width": 28}
    assert report["predictions"][0]["class"] == int(lines[0].split()[1])

    assert P.main([str(tmp_path / "absent.onnx"), str(tmp_path / "one.png")]) == P.EXIT_MODEL
    assert "model file not found" in capsys.readouterr().err
    assert (
        P.main([str(model_path), str(tmp_path / "one.png"), str(tmp_path / "absent.png")])
        == P.EXIT_INPUT
    )
    assert "image file not found" in capsys.readouterr().err
    for argv in ([], [str(model_path)], [str(model_path), "x.png", "--threads", "0"], ["--bogus"]):
        with pytest.raises(SystemExit) as exit_info:
            P.main(argv)
        assert exit_info.value.code == P.EXIT_USAGE
    capsys.readouterr()


@pytest.mark.parametrize("program", ["helpers.predict", "helpers.classify_drawing"])
def test_cli_help_documents_the_exit_codes(program):
    result = subprocess.run(
        [sys.executable, "-m", program, "--help"], capture_output=True, text=True
    )
    assert result.returncode == 0
    for line in ("2  usage error", "3  model error", "4  input error"):
        assert line in result.stdout


def test_cli_runs_as_a_single_copied_file(tmp_path, model_path, digits):
    """predict.py needs nothing else from the repository: copy it alone and run it by path."""
    (tmp_path / "predict.py").write_text(PREDICT_PY.read_text())
    Image.fromarray(digits[0][0]).save(tmp_path / "d.png")
    result = subprocess.run(
        [sys.executable, "predict.py", str(model_path), "d.png"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[0] == "d.png"


def test_predict_imports_only_stdlib_numpy_onnxruntime_and_pillow():
    """What requirements-inference.txt must hold: the imports of predict.py, and nothing of the training stacks."""
    nodes = list(ast.walk(ast.parse(PREDICT_PY.read_text())))
    imported = {
        alias.name.split(".")[0]
        for node in nodes
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    imported |= {
        node.module.split(".")[0]
        for node in nodes
        if isinstance(node, ast.ImportFrom) and node.level == 0
    }
    third_party = imported - set(sys.stdlib_module_names) - {"__future__"}
    assert third_party == {"numpy", "onnxruntime", "PIL"}, third_party
    code = (
        "import sys, helpers.predict; print(sorted({m.split('.')[0] if m.startswith('PIL') else m "
        "for m in sys.modules if m.startswith('helpers') "
        "or m.split('.')[0] in ('torch', 'tensorflow', 'onnx', 'PIL', 'matplotlib')}))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert (
        result.stdout.strip()
        == "['PIL', 'helpers', 'helpers.data', 'helpers.data.paths', 'helpers.predict']"
    )


def test_runs_the_series_models_like_onnxruntime_does(digits, mnist_model):
    """On the real MNIST file, the program's classes equal a plain session.run's."""
    session, spec = P.load_model(mnist_model)
    assert (spec.input_name, spec.output_name, spec.height, spec.width) == (
        "image",
        "logits",
        28,
        28,
    )
    images = digits[0].astype(np.float32) / 255
    plain_session = ort.InferenceSession(mnist_model, providers=["CPUExecutionProvider"])
    (logits,) = plain_session.run(None, {"image": images[:, None]})
    np.testing.assert_array_equal(P.predict(session, spec, images).argmax(1), logits.argmax(1))
    assert (logits.argmax(1) == digits[1]).mean() > 0.9


# ----------------------------------------------------------------------- transparency, blank images
def _dark_on_transparent(digit: np.ndarray) -> np.ndarray:
    """What a canvas exports: black strokes whose opacity is the ink, on a fully transparent background."""
    return np.dstack([np.zeros((*digit.shape, 3), np.uint8), digit])


def test_dark_ink_on_transparent_reads_like_ink_on_white_paper(tmp_path, digits):
    digit = digits[0][0]
    Image.fromarray(_dark_on_transparent(digit), "RGBA").save(tmp_path / "canvas.png")
    # as seen on white paper: 255 - ink; --invert then gives the contract's white-on-black digit back
    np.testing.assert_allclose(
        P.read_png(tmp_path / "canvas.png", (28, 28)), (255 - digit) / 255.0, atol=1e-6
    )
    # the same as gray + alpha (colour type 4)
    gray_alpha = np.stack([np.zeros_like(digit), digit], axis=-1)
    np.testing.assert_allclose(
        P.decode_png(encode_png(gray_alpha, 4), "la", (28, 28)), (255 - digit) / 255, atol=1e-6
    )


@pytest.mark.parametrize(
    "case,message",
    [
        ("fully-transparent", "fully transparent: there is no ink"),
        ("mixed", "both dark"),
        ("blank-black", "the image is blank (every pixel is 0)"),
        ("blank-white", "the image is blank (every pixel is 1)"),
    ],
)
def test_empty_and_ambiguous_images_exit_4_instead_of_guessing(
    tmp_path, digits, model_path, case, message, capsys
):
    rgba = np.zeros((28, 28, 4), np.uint8)
    if case == "fully-transparent":
        rgba[..., :3] = digits[0][0][..., None]  # colour without any opacity is invisible
    elif case == "mixed":  # half the visible pixels black, half white, on a transparent background
        rgba[:, :14, 3], rgba[:, 14:, :] = 255, 255
        rgba[:2] = 0
    else:  # opaque black or white
        rgba[..., 3], rgba[..., :3] = 255, 255 if case == "blank-white" else 0
    Image.fromarray(rgba, "RGBA").save(tmp_path / "x.png")
    assert P.main([str(model_path), str(tmp_path / "x.png")]) == P.EXIT_INPUT
    err = capsys.readouterr().err
    assert message in err and "x.png" in err, err


def test_light_ink_on_transparent_still_reads_white_on_black(tmp_path, digits):
    digit = digits[0][0]
    rgba = np.dstack([np.full((28, 28, 3), 255, np.uint8), digit])
    Image.fromarray(rgba, "RGBA").save(tmp_path / "light.png")
    np.testing.assert_allclose(
        P.read_png(tmp_path / "light.png", (28, 28)), digit / 255.0, atol=1e-6
    )


# -------------------------------------------------------------------------------------- polarity
def dark_on_light_files(folder: Path, digits: np.ndarray) -> dict[str, list[str]]:
    """Real test digits saved the way people save drawings: dark ink on a light (or transparent) background."""
    forms = {
        "grey PNG": (255 - digits, "L"),
        "RGB PNG": (np.repeat(255 - digits[..., None], 3, axis=-1), "RGB"),
        "dark-on-transparent RGBA PNG": (
            np.stack([_dark_on_transparent(d) for d in digits]),
            "RGBA",
        ),
    }
    files = {}
    for form, (images, mode) in forms.items():
        files[form] = [str(folder / f"{form.split()[0]}_{i}.png") for i in range(len(images))]
        for image, path in zip(images, files[form]):
            Image.fromarray(image, mode).save(path)
    np.save(folder / "dark.npy", 255 - digits)
    return files | {"uint8 .npy": [str(folder / "dark.npy")]}


def cli_classes(capsys, *argv, program=P) -> np.ndarray:
    assert program.main([*argv, "--json"]) == P.EXIT_OK, argv
    return np.array([p["class"] for p in json.loads(capsys.readouterr().out)["predictions"]])


@pytest.mark.parametrize(
    "form", ["grey PNG", "RGB PNG", "dark-on-transparent RGBA PNG", "uint8 .npy"]
)
def test_dark_digits_on_light_backgrounds_are_refused_never_misread(
    tmp_path, digits, mnist_model, capsys, form
):
    """Exit 4 instead of a confident wrong digit; --invert reads the digits themselves, classify_drawing right."""
    images, labels = digits
    files = dark_on_light_files(tmp_path, images)[form]
    assert P.main([mnist_model, *files]) == P.EXIT_INPUT
    err = capsys.readouterr().err
    assert (
        "the background is not dark" in err
        and "use --invert" in err
        and "python -m helpers.classify_drawing (drawings of any size)" in err
    ), err
    assert f"{len(labels)} such images in all" in err and "1.00" in err, err
    np.save(tmp_path / "mnist.npy", images)
    plain = cli_classes(capsys, mnist_model, str(tmp_path / "mnist.npy"))
    np.testing.assert_array_equal(cli_classes(capsys, mnist_model, *files, "--invert"), plain)
    assert (cli_classes(capsys, mnist_model, *files, program=CD) == labels).mean() >= 0.9


def test_light_digits_on_black_need_no_flag_and_inverting_them_is_refused(
    tmp_path, digits, mnist_model, capsys
):
    np.save(tmp_path / "mnist.npy", digits[0])
    assert (
        cli_classes(capsys, mnist_model, str(tmp_path / "mnist.npy")) == digits[1]
    ).mean() >= 0.9
    assert P.main([mnist_model, str(tmp_path / "mnist.npy"), "--invert"]) == P.EXIT_INPUT
    assert "not dark after --invert" in capsys.readouterr().err


def test_background_is_the_median_of_the_border(digits):
    image = digits[0][0] / 255.0
    assert P.background(image) == 0 and P.background(1 - image) == 1
    framed = np.zeros((28, 28))
    # 20 of the 112 border values light: a digit touching the edge, still a dark background
    framed[0, :20] = 1.0
    assert P.background(framed) == 0 and P.background(np.stack([framed, 1 - framed])).tolist() == [
        0,
        1,
    ]
    P.check_inputs(np.stack([image, np.maximum(image, framed)]), ["a", "b"])  # accepted
    with pytest.raises(
        P.InputError, match=r"b: the background is not dark \(median of the border pixels 0.50"
    ):
        P.check_inputs(np.stack([image, np.full((28, 28), 0.5) + image / 4]), ["a", "b"])


# ------------------------------------------------------------------------------------ unreadable inputs
def _watch_open(monkeypatch, before_open):
    """Call ``before_open(path)`` at every io.open() of a path (Path.read_bytes uses it; it may raise), then open."""
    import io

    real_open = io.open

    def watched(file, *args, **kwargs):
        if isinstance(file, (str, Path)):
            before_open(Path(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(io, "open", watched)


def test_permission_denied_is_an_input_error_with_exit_4(
    tmp_path, model_path, digits, monkeypatch, capsys
):
    Image.fromarray(digits[0][0]).save(tmp_path / "locked.png")

    # as for a file this user may not read (tests run as root: chmod 000 changes nothing)
    def refuse(
        path,
    ):
        if path == tmp_path / "locked.png":
            raise PermissionError(13, "Permission denied", str(path))

    _watch_open(monkeypatch, refuse)
    assert P.main([str(model_path), str(tmp_path / "locked.png")]) == P.EXIT_INPUT
    assert "permission denied" in capsys.readouterr().err


def test_a_folder_given_as_an_image_is_reported_as_a_folder(tmp_path, model_path, capsys):
    (tmp_path / "digits").mkdir()
    assert P.main([str(model_path), str(tmp_path / "digits")]) == P.EXIT_INPUT
    err = capsys.readouterr().err
    assert "is a folder, not an image file" in err and "not found" not in err


def test_each_image_file_is_opened_once(tmp_path, model_path, digits, monkeypatch, capsys):
    Image.fromarray(digits[0][0]).save(tmp_path / "d.png")
    np.save(tmp_path / "b.npy", digits[0][:2])
    opened = []
    _watch_open(monkeypatch, lambda path: opened.append(path.name))
    assert P.main([str(model_path), str(tmp_path / "d.png"), str(tmp_path / "b.npy")]) == P.EXIT_OK
    assert opened.count("d.png") == 1 and opened.count("b.npy") == 1, opened
    capsys.readouterr()


# ------------------------------------------------------------------------- the drawing program's refusals
def test_classify_drawing_refuses_models_that_are_not_28x28_and_oversized_drawings(
    tmp_path, digits, capsys
):
    Image.fromarray(255 - digits[0][0]).save(tmp_path / "d.png")
    big = linear_model(tmp_path / "m32.onnx", input_shape=("batch", 1, 32, 32))
    assert CD.main([str(big), str(tmp_path / "d.png")]) == P.EXIT_MODEL
    assert "drawings are made into 28x28 images; the model expects 32x32" in capsys.readouterr().err
    model = linear_model(tmp_path / "m28.onnx")
    (tmp_path / "huge.png").write_bytes(_header_only(5000, 300))
    assert CD.main([str(model), str(tmp_path / "huge.png")]) == P.EXIT_INPUT
    assert "5000x300 pixels; expected at most 4096x4096" in capsys.readouterr().err
    (tmp_path / "note.txt").write_text("hello")
    assert CD.main([str(model), str(tmp_path / "note.txt")]) == P.EXIT_INPUT
    assert "neither a PNG image nor a .npy array" in capsys.readouterr().err
    assert CD.main([str(model), str(tmp_path / "d.png")]) == P.EXIT_OK
    assert capsys.readouterr().out.split()[0] == str(tmp_path / "d.png")
