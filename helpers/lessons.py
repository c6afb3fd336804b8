"""The lessons' own code, collected from the notebooks' ``#@save`` cells (generated: don't edit it directly).

Edit the notebook cell named above each definition, then run ``python -m helpers.series sync``.
"""


# Defined in notebooks/01_export_pytorch_mlp.ipynb
MNIST_MEAN, MNIST_STD = 0.1307, 0.3081  # the training pixels' mean and std, rounded


# Defined in notebooks/06_benchmark_runtimes.ipynb
def ratio_rows(results: dict) -> list[dict]:
    """One row per variant: size, accuracy and p50/p90 latency, each also as a ratio (below 1:
    smaller or faster). ``vs_ort_fp32``: against the same model's fp32 ONNX Runtime variant;
    ``vs_framework``: against the same model in its own framework (PyTorch eager or Keras);
    ``None`` when there is no such variant.
    """
    variants = results["variants"]
    rows = []
    for v in variants:
        same = [w for w in variants if w["model"] == v["model"]]
        base = next((w for w in same if (w["runtime"], w["precision"]) == ("onnxruntime", "fp32")),
                    None)
        framework = next((w for w in same if w["runtime"] != "onnxruntime"), None)
        row = {k: v[k] for k in ("name", "model", "runtime", "precision", "size_bytes", "accuracy")}
        row["size_vs_ort_fp32"] = v["size_bytes"] / base["size_bytes"] if base else None
        row["accuracy_drop_pp"] = 100 * (base["accuracy"] - v["accuracy"]) if base else None
        for b in map(str, results["batch_sizes"]):
            p50 = v["latency_us"][b]["p50"]
            row[f"p50_us_b{b}"], row[f"p90_us_b{b}"] = p50, v["latency_us"][b]["p90"]
            row[f"vs_ort_fp32_b{b}"] = p50 / base["latency_us"][b]["p50"] if base else None
            row[f"vs_framework_b{b}"] = (p50 / framework["latency_us"][b]["p50"] if framework
                                         else None)
        rows.append(row)
    return rows


def ratio_table(results: dict) -> str:
    """The ratio table as aligned plain text (also printed by ``python -m helpers.benchmark``)."""
    fmt = lambda value, spec: "—" if value is None else format(value, spec)  # noqa: E731
    header = ["model", "runtime · precision", "size KiB", "size ×", "acc %", "Δ pp"]
    for b in results["batch_sizes"]:
        header += [f"b{b} p50 µs", f"b{b} p90 µs", "×ort32", "×frmwk"]
    lines = [header]
    for r in ratio_rows(results):
        line = [r["model"], f"{r['runtime']} · {r['precision']}", f"{r['size_bytes'] / 1024:.0f}",
                fmt(r["size_vs_ort_fp32"], ".2f"), f"{100 * r['accuracy']:.2f}",
                fmt(r["accuracy_drop_pp"], "+.2f")]
        for b in results["batch_sizes"]:
            line += [f"{r[f'p50_us_b{b}']:.0f}", f"{r[f'p90_us_b{b}']:.0f}",
                     fmt(r[f"vs_ort_fp32_b{b}"], ".2f"), fmt(r[f"vs_framework_b{b}"], ".2f")]
        lines.append(line)
    widths = [max(len(row[i]) for row in lines) for i in range(len(header))]
    text = ["  ".join(c.rjust(w) if i > 1 else c.ljust(w)
                      for i, (c, w) in enumerate(zip(row, widths))) for row in lines]
    text.insert(1, "-" * len(text[0]))
    note = ("size × and ×ort32: against the same model's fp32 ONNX Runtime file; "
            "×frmwk: against the model in its own framework; "
            "Δ pp: accuracy drop in percentage points (negative = better). "
            "Below 1 = smaller/faster.")
    return "\n".join(text + ["", note])


def evaluate_targets(results: dict) -> list[dict]:
    """Each target with its ratio (p50 of ``variant`` / p50 of ``reference``), met or not."""
    p50 = {v["name"]: {b: s["p50"] for b, s in v["latency_us"].items()}
           for v in results["variants"]}
    out = []
    for t in results.get("targets", []):
        b = str(t["batch_size"])
        ratio = p50[t["variant"]][b] / p50[t["reference"]][b]
        out.append({**t, "ratio": ratio, "met": ratio <= t["max_ratio"]})
    return out


def targets_text(results: dict) -> str:
    return "\n".join(f"[{'MET    ' if t['met'] else 'NOT MET'}] {t['description']}: "
                     f"{t['ratio']:.2f}x "
                     f"(target <= {t['max_ratio']}x, batch {t['batch_size']})"
                     for t in evaluate_targets(results))


# Defined in notebooks/07_chat_with_genai.ipynb
def int4_command(hf_dir, out_dir):  # the genai model builder, as typed in a terminal
    return (f"python -m onnxruntime_genai.models.builder -i {hf_dir} -o {out_dir} -p int4 -e cpu"
            " --extra_options algo_config=k_quant")
