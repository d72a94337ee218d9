"""crawlq.decode.sniff: unlabelled HTML is found, binary bytes labelled HTML are not HTML."""

from __future__ import annotations

import codecs

import pytest

from crawlq.decode import decode_body, sniff
from crawlq.request import FetchResult

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
    ],
)
@pytest.mark.parametrize("label", ["text/html", "text/html;charset=utf-8", "application/xhtml+xml"])
def test_binary_signatures_labelled_html_are_not_html(body: bytes, kind: str, label: str) -> None:
    assert sniff(label, body) == (False, f"{kind} signature")
    assert decode_body(label, body) == (None, "")


def test_a_nul_byte_in_the_first_kib_is_binary_after_it_is_not() -> None:
    assert sniff("text/html", PAGE + b"\x00" + PAGE) == (
        False,
        "NUL byte in the first 1024 bytes",
    )
    late = b"<!DOCTYPE html>" + b" " * 1100 + b"\x00" + PAGE
    assert sniff("text/html", late) == (True, None)


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
