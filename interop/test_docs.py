"""Every code block of README.md and docs/*.md is of a checked kind, and every link between the
pages lands: a block marked `<!-- readme-test: NAME -->` is run by a test (test_readme_clients.py);
a `tollgate` command in a shell block names a subcommand and flags the binary has; a `json` block
parses (a config.json fragment of `"Key": value` members as the members of an object); every
other block says what it is; a relative link reaches a file and, with an anchor, a heading there."""
import functools
import json
import re
import shlex
import subprocess

import pytest

from conftest import ROOT, binary

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^[ \t]*```(\S*)\n(.*?)^[ \t]*```\n", re.M | re.S)
SHELL = {"sh", "bash", "console"}


def blocks():
    """(page, info string, code, the text before the block) of every fenced block."""
    for page in PAGES:
        text = page.read_text()
        for match in FENCE.finditer(text):
            yield page, match.group(1), match.group(2), text[:match.start()]


def block_id(block) -> str:
    page, info, _, before = block
    return f"{page.relative_to(ROOT)}:{before.count(chr(10)) + 1}:{info or 'bare'}"


ALL_BLOCKS = list(blocks())


def test_every_block_says_what_it_is():
    bare = [block_id(b) for b in ALL_BLOCKS if not b[1]]
    assert not bare, f"code blocks without an info string (text, sh, json, python, …): {bare}"


def test_every_marked_block_is_run():
    marked = [name for page in PAGES for name in re.findall(r"<!-- readme-test: ([\w-]+) -->", page.read_text())]
    assert len(marked) == len(set(marked)), f"a readme-test name is used twice: {marked}"
    tests = "".join(path.read_text() for path in (ROOT / "interop").glob("test_*.py"))
    run = set(re.findall(r'snippet\("([\w-]+)"', tests))
    assert set(marked) == run, f"marked but not run: {set(marked) - run}; run but not marked: {run - set(marked)}"


@pytest.mark.parametrize("block", [b for b in ALL_BLOCKS if b[1] == "json"], ids=block_id)
def test_json_blocks_parse(block):
    code = block[2].strip()
    if code.startswith('"'):  # members of config.json, e.g. `"TLS": {…}, "GatewayTLS": {…}`
        code = "{" + code + "}"
    json.loads(code)


@functools.cache
def help_text(words: tuple) -> str:
    result = subprocess.run([binary(), *words, "--help"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, f"tollgate {' '.join(words)} --help: {result.stderr}"
    return result.stdout


def subcommands(words: tuple) -> set:
    listed = help_text(words).split("SUBCOMMANDS:", 1)
    return set(re.findall(r"^  (\S+)", listed[1], re.M)) if len(listed) == 2 else set()


def tollgate_commands(code: str):
    """The argument lists of the `tollgate` invocations in a shell block: a command (after `$ `,
    environment assignments, `swift run`, `docker exec NAME`) that is `tollgate` or a path ending
    in `/tollgate`."""
    code = re.sub(r"\\\n", " ", code)
    for line in code.splitlines():
        line = line.removeprefix("$ ")
        for command in re.split(r"&&|\|\||[|;&]", line):
            try:
                words = shlex.split(command, comments=True)
            except ValueError:
                words = command.split()
            while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
                words.pop(0)
            if words[:2] == ["swift", "run"]:
                words = words[2:]
            elif words[:2] == ["docker", "exec"]:
                words = [w for w in words[2:] if not w.startswith("-")][1:]
            if words and (words[0] == "tollgate" or words[0].endswith("/tollgate")):
                yield words[1:]


@pytest.mark.parametrize("block", [b for b in ALL_BLOCKS if b[1] in SHELL], ids=block_id)
def test_commands_exist(block):
    for args in tollgate_commands(block[2]):
        path = ()
        while args and args[0] in subcommands(path):
            path, args = path + (args[0],), args[1:]
        assert path and not subcommands(path), f"tollgate {' '.join(path + tuple(args))}: not a subcommand"
        flags = {a.split("=", 1)[0] for a in args if a.startswith("--")}
        unknown = {f for f in flags if not re.search(rf"(^|\s){re.escape(f)}\b", help_text(path), re.M)}
        assert not unknown, f"tollgate {' '.join(path)} has no {unknown}"


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but `-` and `_` dropped, spaces as `-`."""
    heading = re.sub(r"`|\*\*?", "", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", heading).replace(" ", "-")


def anchors(page) -> set:
    seen, out = {}, set()
    text = FENCE.sub("", page.read_text())
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.M):
        base = slug(heading)
        n = seen.get(base, 0)
        out.add(base if n == 0 else f"{base}-{n}")
        seen[base] = n + 1
    return out


def links():
    for page in PAGES:
        text = FENCE.sub("", page.read_text())
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if not re.match(r"[a-z]+:", target):
                yield page, target


@pytest.mark.parametrize("link", list(links()), ids=lambda l: f"{l[0].relative_to(ROOT)}->{l[1]}")
def test_links_land(link):
    page, target = link
    path, _, anchor = target.partition("#")
    destination = (page.parent / path).resolve() if path else page
    assert destination.exists(), f"{target}: no such file"
    if anchor:
        assert destination.suffix == ".md" and anchor in anchors(destination), f"{target}: no such heading"


def test_slugs_follow_github():
    assert slug("Mobile Storage API and change feed (port 7080)") == "mobile-storage-api-and-change-feed-port-7080"
    assert slug("The s3 backend's figures") == "the-s3-backends-figures"
    assert slug("Configuration reference (`config.json`)") == "configuration-reference-configjson"


def test_the_command_parser_finds_what_it_should():
    found = list(tollgate_commands("docker exec tollgate tollgate token issue   # a comment\n"
                                   "swift run tollgate serve &\n$ tollgate policy check --strict policy/*.txt\n"
                                   "docker build -t tollgate .\nLOG_LEVEL=debug .build/debug/tollgate serve --config c.json\n"))
    assert found == [["token", "issue"], ["serve"], ["policy", "check", "--strict", "policy/*.txt"],
                     ["serve", "--config", "c.json"]]
