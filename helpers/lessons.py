"""The lessons' own code, collected from the notebooks' ``#@save`` cells (generated: don't edit it directly).

Edit the notebook cell named above each definition, then run ``python -m helpers.series sync``.
"""

# Defined in notebooks/01_export_pytorch_mlp.ipynb
MNIST_MEAN, MNIST_STD = 0.1307, 0.3081  # the training pixels' mean and std, rounded


# Defined in notebooks/07_chat_with_genai.ipynb
def int4_command(hf_dir, out_dir):  # the genai model builder, as typed in a terminal
    return (
        f"python -m onnxruntime_genai.models.builder -i {hf_dir} -o {out_dir} -p int4 -e cpu"
        " --extra_options algo_config=k_quant"
    )
