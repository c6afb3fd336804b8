"""Notebook 07's chat box: ipywidgets around a chat whose ``ask(text, on_text=...)`` streams the answer."""

from __future__ import annotations

import html
from typing import Callable

CUT = " <i>[cut: the answer reached its token budget]</i>"


class ChatBox:
    def __init__(self, new_chat: Callable[[], object]):
        import ipywidgets as widgets

        self.new_chat, self.chat = new_chat, new_chat()
        self.transcript = widgets.HTML(value="<i>Ask me something.</i><br>")
        self.question = widgets.Text(
            placeholder="Type a question", layout=widgets.Layout(width="60%")
        )
        self.send_button = widgets.Button(description="Send", button_style="primary")
        new_button = widgets.Button(description="New conversation")
        self.send_button.on_click(lambda _: self.send(self.question.value))
        new_button.on_click(lambda _: self.new())
        self.widget = widgets.VBox(
            [self.transcript, widgets.HBox([self.question, self.send_button, new_button])]
        )

    def send(self, text: str) -> None:
        """Ask the chat, streaming the answer into the transcript; a cut answer is marked as cut."""
        text = text.strip()
        if not text:
            return
        self.question.value = ""
        self.transcript.value += f"<b>you:</b> {html.escape(text)}<br><b>assistant:</b> "
        before = self.transcript.value
        self.send_button.disabled = True
        try:
            _, info = self.chat.ask(
                text,
                on_text=lambda answer: setattr(
                    self.transcript, "value", before + html.escape(answer)
                ),
            )
            if info.get("cut"):
                self.transcript.value += CUT
        except ValueError as err:  # a message too long for max_length: said in the box
            self.transcript.value = before + f"<i>{html.escape(str(err))}</i>"
        finally:
            self.transcript.value += "<br>"
            self.send_button.disabled = False

    def new(self) -> None:
        """What a click on *New conversation* does."""
        self.chat = self.new_chat()
        self.transcript.value = "<i>New conversation.</i><br>"
