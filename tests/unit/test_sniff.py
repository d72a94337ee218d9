"""crawlq.web.decode.sniff: unlabelled HTML is found, binary bytes labelled HTML are not HTML."""

from __future__ import annotations

import codecs
import random
import zlib

import brotli  # type: ignore[import-untyped]
import pytest

from crawlq.links import extract_title, parse_html
from crawlq.request import FetchResult
from crawlq.web.decode import (
    BINARY_SHARE,
    MIN_BINARY_BYTES,
    binary_data_bytes,
    decode_body,
    sniff,
)

PAGE = b'<title>t</title><a href="/next">next</a>'


@pytest.mark.parametrize(
    "body",
    [
        b"<!DOCTYPE html>" + PAGE,
        b"<!doctype HTML " + PAGE,
        b" \r\n\t<html>" + PAGE,
        b"<HTML lang=en>" + PAGE,
        b"<html\n lang=en>" + PAGE,
        b"<head>" + PAGE,
        b"<body>" + PAGE,
        b"<title>t</title>",
        b"<script>x</script>" + PAGE,
        b"<iframe src=x>",
        b"<h1>Hi</h1>",
        b"<div>" + PAGE,
        b"<font size=2>",
        b"<table>",
        b"<a href=x>x</a>",
        b"<style>p{}</style>",
        b"<b>bold</b>",
        b"<br>",
        b"<p>para",
        b"<!-- comment -->" + PAGE,
        codecs.BOM_UTF8 + b"<!DOCTYPE html>" + PAGE,
    ],
)
@pytest.mark.parametrize("label", [None, "", "unknown/unknown", "application/unknown", "*/*"])
def test_unlabelled_html_signatures_sniff_as_html(body: bytes, label: str | None) -> None:
    assert sniff(label, body).html
    encoding, text = decode_body(label, body)
    assert encoding is not None and text.lstrip("\ufeff \r\n\t").startswith("<")


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"plain text, then <html>",
        b"<htmlx>",  # a signature must end the tag name
        b"<bold>",
        b"<pre>x</pre>",  # not in the table
        b"<?xml version='1.0'?><html>",
        b"<html",  # no tag end
        b"%PDF-1.4 <html>",
        b'{"json": "<html>"}',
    ],
)
def test_other_unlabelled_bodies_are_not_html(body: bytes) -> None:
    assert sniff(None, body) == (False, None)
    assert decode_body(None, body) == (None, "")


def test_a_label_is_not_second_guessed_into_html() -> None:
    assert not sniff("text/plain", b"<!DOCTYPE html>" + PAGE).html
    assert not sniff("application/octet-stream", b"<html>" + PAGE).html


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        (b"%PDF-1.7\n" + PAGE, "application/pdf"),
        (b"\x89PNG\r\n\x1a\n" + PAGE, "image/png"),
        (b"PK\x03\x04" + PAGE, "application/zip"),
        (b"GIF89a" + PAGE, "image/gif"),
        (b"\xff\xd8\xff\xe0" + PAGE, "image/jpeg"),
        (b"RIFF\x10\x20\x30\x40WEBPVP8 " + PAGE, "image/webp"),
        (b"\x1f\x8b\x08\x00" + PAGE, "application/x-gzip"),
        (b"wOF2" + PAGE, "font/woff2"),
        (b"\x00\x00\x01\x00\x01\x00\x10\x10" + PAGE, "image/x-icon"),
        (b"\x00\x01\x00\x00\x00\x0e\x00\x80" + PAGE, "font/ttf"),
        (b"\x00\x00\x00\x18ftypmp42" + PAGE, "video/mp4"),
    ],
)
@pytest.mark.parametrize("label", ["text/html", "text/html;charset=utf-8", "application/xhtml+xml"])
def test_binary_signatures_labelled_html_are_not_html(body: bytes, kind: str, label: str) -> None:
    assert sniff(label, body) == (False, f"{kind} signature")
    assert decode_body(label, body) == (None, "")


@pytest.mark.parametrize(
    "body",
    [
        PAGE + b"\x00" + PAGE,  # a stray NUL
        b"\x00" + PAGE,
        b"<p>\x00</p>",  # one NUL in a tiny page is most of it
        b"<html>\x00\x00\x00" + PAGE,
        b"<!DOCTYPE html>" + PAGE + b"a\x01b\x0bc\x1fd" * 5 + b" " * 800,  # 15 of ~1000: 1.5 %
        b"<!DOCTYPE html>" + b" " * 1500 + b"\x00" * 500 + PAGE,  # past the first 1445 bytes
    ],
)
def test_stray_binary_bytes_in_html_keep_it_html(body: bytes) -> None:
    assert sniff("text/html", body) == (True, None)
    _, text = decode_body("text/html", body)
    assert text


def test_a_nul_in_html_keeps_its_title_and_links_through_the_parser() -> None:
    body = b"<!DOCTYPE html><title>T\x00itle</title>\x00<p>a\x00b</p><a href=/next>n</a>"
    _, text = decode_body("text/html; charset=utf-8", body)
    tree = parse_html(text)
    assert extract_title(tree) == "T\ufffditle"  # RCDATA: NUL -> U+FFFD (HTML Standard)
    assert [a.attributes["href"] for a in tree.css("a")] == ["/next"]
    assert tree.body is not None and "ab" in tree.body.text()  # NUL in text: dropped


def test_binary_data_bytes_are_whatwg_mime_sniffing_s_set() -> None:
    everything = bytes(range(256))
    assert binary_data_bytes(everything) == 27  # 0x00-0x08, 0x0B, 0x0E-0x1A, 0x1C-0x1F
    assert binary_data_bytes(b"\t\n\x0c\r\x1b <html>\xff") == 0
    assert binary_data_bytes(b"\x00\x08\x0b\x0e\x1a\x1c\x1f") == 7


def test_a_high_share_of_binary_data_bytes_is_binary() -> None:
    sample = 1445
    at_share = int(BINARY_SHARE * sample) + 1
    body = b"\x00" * at_share + b"a" * (sample - at_share) + PAGE
    assert sniff("text/html", body) == (
        False,
        f"{at_share} binary data bytes in the first {sample} bytes",
    )
    below = at_share - 2
    body = b"\x00" * below + b"a" * (sample - below) + PAGE
    assert sniff("text/html", body) == (True, None)
    short = b"\x01" * MIN_BINARY_BYTES + b"<p>"
    assert (
        sniff("text/html", short).binary
        == f"{MIN_BINARY_BYTES} binary data bytes in the first 11 bytes"
    )
    assert sniff("text/html", short[1:]) == (True, None)


def test_compressed_bytes_labelled_html_without_their_coding_are_binary() -> None:
    page = b"<!DOCTYPE html><title>t</title>" + b"".join(
        b'<p>Paragraph %d, <a href="/p/%d">link %d</a></p>\n' % (n, n, n) for n in range(400)
    )
    raw_deflate = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    for body in (
        zlib.compress(page),
        raw_deflate.compress(page) + raw_deflate.flush(),
        brotli.compress(page),
        random.Random(7).randbytes(5000),
    ):
        verdict = sniff("text/html", body)
        assert not verdict.html and verdict.binary is not None
        assert " binary data bytes in the first " in verdict.binary


@pytest.mark.parametrize(
    ("label", "body"),
    [
        ("text/html", ("\ufeff<!DOCTYPE html><title>wide</title>").encode("utf-16-le")),
        ("text/html", ("\ufeff<!DOCTYPE html><title>wide</title>").encode("utf-16-be")),
        ("text/html; charset=utf-16le", "<!DOCTYPE html><title>wide</title>".encode("utf-16-le")),
        ("text/html; charset=UTF-32", "<!DOCTYPE html><title>wide</title>".encode("utf-32")),
    ],
)
def test_utf16_and_utf32_html_keep_their_nul_bytes(label: str, body: bytes) -> None:
    assert sniff(label, body) == (True, None)
    _, text = decode_body(label, body)
    assert "<title>wide</title>" in text


def test_fetch_result_exposes_the_verdict() -> None:
    def result(headers: dict[str, str], body: bytes) -> FetchResult:
        return FetchResult("http://e.test/", "http://e.test/", 200, headers, body, None, "", 0.1)

    assert result({}, b"<!DOCTYPE html>" + PAGE).is_html
    assert result({"content-type": "text/html"}, PAGE).is_html
    pdf = result({"content-type": "text/html"}, b"%PDF-1.4" + PAGE)
    assert (pdf.is_html, pdf.binary) == (False, "application/pdf signature")
    assert result({"content-type": "image/png"}, b"\x89PNG\r\n\x1a\n").binary is None


def test_made_up_charsets_do_not_grow_the_codec_cache_without_bound() -> None:
    """Each page naming a new charset would leave a miss in Python's codec cache for good."""
    import encodings

    from crawlq.web.decode import CODEC_CACHE_MAX, decode_body

    for i in range(3 * CODEC_CACHE_MAX):
        body = b"<meta charset='y-made-up-%d'><title>t</title>" % i
        _encoding, text = decode_body(f"text/html; charset=x-made-up-{i}", body)
        assert "<title>t</title>" in text
    assert len(encodings._cache) <= CODEC_CACHE_MAX + 3  # this call's misses, at most
    assert decode_body("text/html; charset=latin-1", b"caf\xe9")[1] == "café"
