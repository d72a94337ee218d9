"""Default values of settings that are too long, or too derived, to write in the field itself."""

from __future__ import annotations

from crawlq import __version__

__all__ = ["DEFAULT_SKIP_EXTENSIONS", "DEFAULT_USER_AGENT"]

DEFAULT_USER_AGENT = "crawlq/" + ".".join(__version__.split(".")[:2])
"""The default ``user_agent``: ``crawlq/<major>.<minor>`` of `crawlq.__version__`."""

DEFAULT_SKIP_EXTENSIONS: tuple[str, ...] = (
    # images
    "ai", "avif", "bmp", "cr2", "eps", "gif", "heic", "heif", "ico", "jfif", "jpe",
    "jpeg", "jpg", "nef", "png", "psd", "raw", "svg", "svgz", "tif", "tiff", "webp",
    # audio
    "aac", "aif", "aiff", "amr", "flac", "m4a", "mid", "midi", "mka", "mp3", "oga",
    "ogg", "opus", "ra", "wav", "weba", "wma",
    # video
    "3g2", "3gp", "asf", "avi", "flv", "m2ts", "m4v", "mkv", "mov", "mp4", "mpeg",
    "mpg", "mts", "ogv", "qt", "rm", "swf", "ts", "vob", "webm", "wmv",
    # styles, scripts, source maps, fonts
    "css", "js", "map", "mjs", "eot", "otf", "ttf", "woff", "woff2",
    # archives, packages, disk images, binaries
    "7z", "apk", "bin", "bz2", "cab", "deb", "dll", "dmg", "exe", "gz", "img", "iso",
    "jar", "lz", "lzma", "msi", "rar", "rpm", "so", "tar", "tbz", "tbz2", "tgz", "txz",
    "war", "whl", "xz", "z", "zip", "zst",
    # office documents, e-books, PDF
    "doc", "docm", "docx", "epub", "key", "mobi", "numbers", "odg", "odp", "ods",
    "odt", "pages", "pdf", "pps", "ppsx", "ppt", "pptm", "pptx", "ps", "rtf", "xls",
    "xlsm", "xlsx",
)  # fmt: skip
"""The default of ``skip_extensions``: path extensions (lower case, no dot) of links that
the page's link extraction leaves out (`crawlq.links.extract_links`)."""
