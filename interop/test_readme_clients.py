"""The client snippets of README.md and docs/*.md (between `<!-- readme-test: NAME -->` and
`<!-- /readme-test -->`), run as written against a live server, with only its address put in: the
docs cannot rot. interop/test_docs.py checks that every marked block is run here."""
import ast
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import on_backend, ROOT, ROOT_SECRET, Server, get_json


DOC_PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def snippet(name: str) -> str:
    """The block marked `name`, in whichever page holds it (a name is unique across pages)."""
    found = [match.group(1) for page in DOC_PAGES
             for match in re.finditer(rf"<!-- readme-test: {name} -->\n```\w+\n(.*?)```\n<!-- /readme-test -->",
                                      page.read_text(), re.S)]
    assert len(found) == 1, f"{len(found)} readme-test blocks named {name} in README.md and docs/*.md"
    return found[0]


# Runs on the local store and again on the S3 backend over RGW (conftest.BACKENDS).
ON_RGW_TOO = True


@pytest.fixture(scope="module")
def server(request, backend):
    s = on_backend(request, backend, {"AccessKeySecret": ROOT_SECRET}).start()
    yield s
    s.cleanup()


def on(server, code: str, gateway_host: str = "127.0.0.1") -> str:
    """The snippet with the docs' default addresses replaced by the test server's."""
    assert "http://127.0.0.1:7080" in code or "http://127.0.0.1:9000" in code
    return (code.replace("http://127.0.0.1:7080", server.url)
                .replace("http://127.0.0.1:9000", f"http://{gateway_host}:{server.gateway_port}"))


def run_python(code: str) -> list[str]:
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_boto3_snippet(server):
    # Upload, download, and a presigned GET (SigV4, thanks to signature_version="s3v4").
    assert run_python(on(server, snippet("boto3"))) == ["b'hello'", "b'hello'"]


@pytest.mark.parametrize("gateway_host", ["127.0.0.1", "localhost"])
def test_oss2_snippet(server, gateway_host):
    # An IP endpoint, and a host name without bucket subdomains: both path-style.
    assert run_python(on(server, snippet("oss2"), gateway_host)) == ["b'hello'"]


def test_awscli_snippet(server, tmp_path):
    status, _, body = get_json(server.url + "/")
    assert status == 200, body
    creds = json.loads(body)
    code = on(server, snippet("awscli"))
    placeholders = "AWS_ACCESS_KEY_ID='STS.…' AWS_SECRET_ACCESS_KEY='…' AWS_SESSION_TOKEN='TG1.…'"
    assert placeholders in code
    code = code.replace(placeholders, f"AWS_ACCESS_KEY_ID='{creds['AccessKeyId']}' "
                                      f"AWS_SECRET_ACCESS_KEY='{creds['AccessKeySecret']}' "
                                      f"AWS_SESSION_TOKEN='{creds['SecurityToken']}'")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_CONFIG_FILE=str(tmp_path / "aws-config"), AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "aws-credentials"))
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "upload: ./hello.txt to s3://tollgate/hello.txt" in result.stdout
    assert re.search(r"^\S+ \S+ +6 hello.txt$", result.stdout, re.M), result.stdout


def test_admin_revoke_snippet(server):
    # Signed by the root credentials: the server prints its access key id at start-up.
    key_id = re.search(r"root\.access_key_id=(\S+)", server.output()).group(1)
    code = f"ROOT_ACCESS_KEY_ID = {key_id!r}\nROOT_SECRET = {ROOT_SECRET!r}\n" + on(server, snippet("admin-revoke"))
    [line] = run_python(code)
    answer = json.loads(ast.literal_eval(line))  # the snippet prints the body as bytes
    assert (answer["StatusCode"], answer["Type"], answer["Value"]) == (200, "Subject", "alice"), answer
