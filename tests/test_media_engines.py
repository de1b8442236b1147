"""A tool's pictures reach the model as its API takes them, checked on the wire: the fake
servers on 127.0.0.1 receive the real SDKs' requests, and each request is held to the
provider's documented shape of images (fake_servers.*_image_problems). A model set to take
no images (``images=False``) reads a text note instead.

There is no OpenAI Responses or Gemini engine in this package, so those shapes are not
sent anywhere (a Responses engine would put an ``input_image`` in the function call
output, Gemini ``inline_data`` parts).
"""

from __future__ import annotations

import base64
import io
from pathlib import Path

from PIL import Image

from fake_servers import (
    FakeModelServer,
    anthropic_image_problems,
    anthropic_reply,
    openai_image_problems,
    openai_reply,
)
from yggdrasil.loki import Loki
from yggdrasil.loki.engine import RetryPolicy


def _shot(root: Path) -> None:
    Image.new("RGB", (3000, 1000), (250, 200, 0)).save(root / "shot.png")
    (root / "a.txt").write_text("alpha\n")


def _decoded(data: str) -> Image.Image:
    return Image.open(io.BytesIO(base64.b64decode(data)))


def _loki(kind: str, server: FakeModelServer, **kwargs: object) -> Loki:
    url = f"{server.url}/v1" if kind == "openai" else server.url
    return Loki(kind, model="fake", base_url=url, api_key="sk-test",  # type: ignore[arg-type]
                retry=RetryPolicy(attempts=1), **kwargs)


def test_anthropic_sends_the_picture_inside_the_tool_result(server: FakeModelServer,
                                                           root: Path) -> None:
    _shot(root)
    server.queue(anthropic_reply(None, [("read_file", {"path": "shot.png"}),
                                        ("read_file", {"path": "a.txt"})]),
                 anthropic_reply("A yellow screenshot."))
    result = _loki("anthropic", server).act("look", root=root)
    assert result.answer == "A yellow screenshot."
    assert result.steps[0].observation == ("shot.png: PNG image, 3000x1000 px, "
                                           f"{_kb(root / 'shot.png')}; shown downscaled to "
                                           "2048x683 px")
    last = server.posts()[-1]
    assert anthropic_image_problems(last) == []
    shot, text = last["messages"][-1]["content"]
    assert shot["type"] == "tool_result" and shot["tool_use_id"] == "toolu_0"
    words, picture = shot["content"]
    assert words == {"type": "text", "text": result.steps[0].observation}
    assert picture["source"]["media_type"] == "image/png"
    assert _decoded(picture["source"]["data"]).size == (2048, 683)
    assert text["content"] == "1\talpha"  # a text result stays a string


def test_openai_sends_the_pictures_in_a_user_message_after_the_results(
        server: FakeModelServer, root: Path) -> None:
    _shot(root)
    server.queue(openai_reply(None, [("read_file", {"path": "shot.png"}),
                                     ("read_file", {"path": "a.txt"})]),
                 openai_reply("Yellow."))
    assert _loki("openai", server).act("look", root=root).answer == "Yellow."
    last = server.posts()[-1]
    assert openai_image_problems(last) == []
    tool_a, tool_b, pictures = last["messages"][-3:]
    assert (tool_a["role"], tool_b["role"], pictures["role"]) == ("tool", "tool", "user")
    assert tool_a["content"].startswith("shot.png: PNG image, 3000x1000 px")
    words, image = pictures["content"]
    assert words == {"type": "text", "text": "The image read_file returned (call call_0), "
                                             "2048x683 px:"}
    url = image["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    assert _decoded(url.split(",", 1)[1]).size == (2048, 683)


def test_a_model_that_takes_no_images_reads_why(server: FakeModelServer, root: Path) -> None:
    _shot(root)
    for kind, reply in (("openai", openai_reply), ("anthropic", anthropic_reply)):
        server.queue(reply(None, [("read_file", {"path": "shot.png"})]), reply("ok"))
        _loki(kind, server, images=False).act("look", root=root)
        sent = str(server.posts()[-1]["messages"])
        assert "image_url" not in sent and "'base64'" not in sent
        assert ("[1 image not shown (image/png 2048x683 px): the " + kind + " engine is set to "
                "send this model no images (images=False)") in sent


def test_the_text_protocol_sends_the_picture_with_the_observation(server: FakeModelServer,
                                                                 root: Path) -> None:
    _shot(root)
    server.queue(openai_reply('{"tool": "read_file", "args": {"path": "shot.png"}}'),
                 openai_reply('{"answer": "seen"}'))
    result = _loki("openai", server, protocol="text").act("look", root=root)
    assert result.answer == "seen", result.steps
    last = server.posts()[-1]
    assert openai_image_problems(last) == []
    observation = last["messages"][-1]
    assert observation["role"] == "user" and observation["content"][1]["type"] == "image_url"


def _kb(path: Path) -> str:
    from yggdrasil.loki.results import human_size

    return human_size(path.stat().st_size)


def test_mcp_answers_a_picture_as_image_content(root: Path) -> None:
    """`loki mcp` through the SDK's own client: the image part is an ImageContent, the
    typed data (no bytes) the structuredContent its output schema declares."""
    import sys

    from test_mcp import field, serve_and

    _shot(root)

    async def scenario(client: object) -> object:
        return await client.call_tool("read_file", {"path": "shot.png"})  # type: ignore[attr-defined]

    result, _ = serve_and(sys.executable, root, scenario)
    text, image = result.content
    assert text.type == "text" and text.text.startswith("shot.png: PNG image, 3000x1000 px")
    assert (image.type, field(image, "mime_type")) == ("image", "image/png")
    assert _decoded(image.data).size == (2048, 683)
    data = field(result, "structured_content")
    assert (data["kind"], data["width"], data["height"]) == ("image", 3000, 1000)
    assert "images" not in data


def test_a_picture_counts_against_the_budget_and_goes_when_its_step_is_elided() -> None:
    from yggdrasil.loki.loop._conversation import Conversation

    conv = Conversation("system", budget=8_000, keep_recent=1)
    picture = {"mime": "image/png", "data": "AAAA", "width": 1500, "height": 1000}
    conv.add({"role": "user", "content": "task"})
    for n in (1, 2):  # a short text each, and a picture of 2,000 tokens (8,000 characters)
        conv.add_observation({"role": "tool", "tool_call_id": f"c{n}", "content": "shot",
                              "images": [picture]}, step=n, tool="read_file")
    assert conv.size() > 16_000
    assert conv.fit() == 1  # the older one goes, its picture with it
    first, second = conv.messages[1], conv.messages[2]
    assert "images" not in first and first["content"].startswith("[elided")
    assert second["images"] == [picture]
