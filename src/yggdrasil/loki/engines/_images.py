"""Pictures in the conversation: a tool's image parts as neutral message data, and the
text an engine sends in their place when its model takes no images.

A tool or user message may carry ``"images": [{"mime", "data" (base64), "width",
"height"}]``; each engine puts them where its API takes pictures (Anthropic: image blocks
inside the tool_result; Chat Completions: a user message after the tool results) or, with
``images=False``, says in text what was not shown and why.
"""

from __future__ import annotations

import base64
from typing import Any

from ._completion import Message

__all__ = ["image_message", "images_of", "unseen_images"]


def image_message(part: Any) -> dict[str, Any]:
    """An image part (``results.ImagePart``: the engines never import the tools' side) as
    JSON-ready message data."""
    return {"mime": part.mime, "data": base64.b64encode(part.data).decode("ascii"),
            "width": part.width, "height": part.height}


def images_of(message: Message) -> list[dict[str, Any]]:
    images = message.get("images") or []
    return [i for i in images if isinstance(i, dict) and i.get("data")]


def unseen_images(images: list[dict[str, Any]], engine: str) -> str:
    """What a model that takes no images reads instead of them."""
    shown = ", ".join(f"{i.get('mime', 'image')} {i.get('width', 0)}x{i.get('height', 0)} px"
                      for i in images)
    count = f"{len(images)} image{'s' * (len(images) != 1)}"
    return (f"[{count} not shown ({shown}): the {engine} engine is set to send this model no "
            "images (images=False); read the text above, or use a model that takes images]")
