"""`tollgate policy check` and `tollgate policy simulate` on the shipped policy files."""
import json
import subprocess
import time

import pytest

from conftest import ROOT, ROOT_SECRET, Server, binary

SHIPPED = ["policy/all_policy.txt", "policy/bucket_read_policy.txt", "policy/bucket_read_write_policy.txt",
           "policy/user_isolated_policy.txt"]


def tollgate(*args):
    return subprocess.run([binary(), *args], cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_shipped_policies_check_clean():
    result = tollgate("policy", "check", "--config", "config.json", *SHIPPED)
    assert result.returncode == 0, result.stderr
    for path in SHIPPED:
        assert f"{path}: ok" in result.stdout


def test_unfilled_placeholder_names_file_and_line(tmp_path):
    config = tmp_path / "config.json"
    config.write_text('{"PolicyFile": "x.txt"}')
    result = tollgate("policy", "check", "--config", str(config), "policy/bucket_read_policy.txt")
    assert result.returncode == 1
    assert "policy/bucket_read_policy.txt:" in result.stderr and "BUCKET_NAME" in result.stderr


@pytest.mark.parametrize("text,position,message", [
    ('{"Version":"1","Statement":[{"Effect":"Maybe","Action":"oss:*","Resource":"*"}]}', "1:39", "Effect"),
    ('{"Version":"3","Statement":[]}', "1:12", "Version"),
    ('{"Version":"1",\n "Statement":[{"Effect":"Allow","Resource":"*"}]}', "2:", "Action"),
    ('{"Version":"1",\n "Statement": [\n', "", "JSON"),
])
def test_broken_policy_reports_position(tmp_path, text, position, message):
    path = tmp_path / "broken.txt"
    path.write_text(text)
    result = tollgate("policy", "check", str(path))
    assert result.returncode == 1
    line = [l for l in result.stderr.splitlines() if l.startswith(str(path))][0]
    assert line.startswith(f"{path}:{position}"), line
    assert message.lower() in line.lower(), line


@pytest.mark.parametrize("policy,action,resource,context,expected,code", [
    ("all_policy.txt", "oss:PutObject", "acs:oss:*:*:tollgate/a.txt", [], "Allow", 0),
    ("all_policy.txt", "s3:DeleteObject", "arn:aws:s3:::other/a.txt", [], "Allow", 0),
    ("bucket_read_policy.txt", "oss:GetObject", "acs:oss:*:*:tollgate/a.txt", [], "Allow", 0),
    ("bucket_read_policy.txt", "s3:GetObject", "arn:aws:s3:::tollgate/a.txt", [], "Allow", 0),
    ("bucket_read_policy.txt", "oss:ListObjects", "acs:oss:*:*:tollgate", [], "Allow", 0),
    # Every S3 request s3:ListBucket authorises is allowed; OSS's GetBucketStat under it is not.
    ("bucket_read_policy.txt", "s3:ListBucket", "arn:aws:s3:::tollgate", [], "Allow", 0),
    ("bucket_read_policy.txt", "oss:GetBucketStat", "acs:oss:*:*:tollgate", [], "Deny (implicit)", 1),
    ("bucket_read_policy.txt", "oss:PutObject", "acs:oss:*:*:tollgate/a.txt", [], "Deny (implicit)", 1),
    ("bucket_read_policy.txt", "oss:GetObject", "acs:oss:*:*:elsewhere/a.txt", [], "Deny (implicit)", 1),
    ("bucket_read_write_policy.txt", "oss:PutObject", "acs:oss:*:*:tollgate/a.txt", [], "Allow", 0),
    ("bucket_read_write_policy.txt", "s3:PutObject", "arn:aws:s3:::elsewhere/a.txt", [], "Deny (implicit)", 1),
    ("user_isolated_policy.txt", "s3:PutObject", "arn:aws:s3:::tollgate/alice/a.txt", ["aws:username=alice"], "Allow", 0),
    ("user_isolated_policy.txt", "s3:GetObject", "arn:aws:s3:::tollgate/bob/a.txt", ["aws:username=alice"], "Deny", 1),
    ("user_isolated_policy.txt", "s3:GetObject", "arn:aws:s3:::tollgate/alice/a.txt", [], "Deny", 1),
])
def test_simulate_shipped_policies(policy, action, resource, context, expected, code):
    args = ["policy", "simulate", "--config", "config.json", "--policy", f"policy/{policy}",
            "--action", action, "--resource", resource]
    for pair in context:
        args += ["--context", pair]
    result = tollgate(*args)
    assert result.returncode == code, (result.stdout, result.stderr)
    assert result.stdout.startswith(expected), result.stdout
    if code == 0:
        assert f"policy/{policy}:" in result.stdout, "names the deciding statement's file and line"


def test_simulate_bad_input_exits_2():
    assert tollgate("policy", "simulate", "--policy", "policy/nope.txt", "--action", "s3:GetObject",
                    "--resource", "arn:aws:s3:::b/k").returncode == 2
    assert tollgate("policy", "simulate", "--config", "config.json", "--policy", "policy/all_policy.txt",
                    "--action", "GetObject", "--resource", "arn:aws:s3:::b/k").returncode == 2


FINDINGS = """{
  "Version": "1",
  "Statement": [
    {"Effect": "Deny", "Action": "oss:*", "Resource": "acs:oss:*:*:tollgate/private/*"},
    {"Effect": "Allow", "Action": ["oss:GetObject"], "Resource": "acs:oss:*:*:tollgate/private/*"},
    {"Effect": "Allow", "Action": "oss:ListObjects", "Resource": "acs:oss:*:*:tollgate/*",
     "Condition": {"StringLike": {"oss:Prefx": "a/*"}}}
  ]
}
"""


def test_check_warnings_print_but_fail_only_with_strict(tmp_path):
    path = tmp_path / "findings.json"
    path.write_text(FINDINGS)
    result = tollgate("policy", "check", str(path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{path}: ok, 3 warnings"
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith(f"{path}:5:5: warning: statement 2 (Allow) never takes effect: statement 1 (Deny, line 4)"), lines
    assert lines[1].startswith(f'{path}:6:35: warning: oss:ListObjects acts on a bucket'), lines
    assert lines[2].startswith(f'{path}:7:35: warning: condition key "oss:Prefx" is never set by Tollgate'), lines
    assert "did you mean oss:prefix?" in lines[2]
    strict = tollgate("policy", "check", "--strict", str(path))
    assert strict.returncode == 1
    assert strict.stderr == result.stderr


def test_check_unknown_action_is_an_error_with_did_you_mean(tmp_path):
    path = tmp_path / "typo.json"
    path.write_text('{"Version": "1", "Statement": [\n  {"Effect": "Allow", "Action": ["oss:GetObjekt", "s3:GetObjekt"], "Resource": "*"}\n]}\n')
    result = tollgate("policy", "check", str(path))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f'{path}:2:34: unknown action "oss:GetObjekt" (did you mean oss:GetObject?)',
        f'{path}:2:51: unknown action "s3:GetObjekt" (did you mean s3:GetObject?)',
    ]
    assert f"{path}: ok" not in result.stdout


def test_simulate_unknown_action_is_bad_input_with_did_you_mean():
    result = tollgate("policy", "simulate", "--config", "config.json", "--policy", "policy/all_policy.txt",
                      "--action", "oss:GetObjekt", "--resource", "acs:oss:*:*:tollgate/a.txt")
    assert result.returncode == 2
    assert result.stderr.strip() == 'tollgate policy simulate: unknown action "oss:GetObjekt": did you mean oss:GetObject?'
    # Case does not matter, as in the evaluator.
    assert tollgate("policy", "simulate", "--config", "config.json", "--policy", "policy/all_policy.txt",
                    "--action", "OSS:getobject", "--resource", "acs:oss:*:*:tollgate/a.txt").returncode == 0


def test_config_syntax_error_names_line_and_column(tmp_path):
    config = tmp_path / "config.json"
    config.write_text('{\n  "PolicyFile": "policy/all_policy.txt"\n  "Port": 7080\n}\n')
    result = tollgate("policy", "check", "--config", str(config), "policy/all_policy.txt")
    assert result.returncode == 2
    assert result.stderr.strip().startswith(f"tollgate: config error: {config}:3:3: invalid JSON: "), result.stderr


def test_serve_loads_a_policy_with_warnings_and_logs_them():
    s = Server({"AccessKeySecret": ROOT_SECRET, "Roles": {"odd": "policy/findings.json"}})
    try:
        (s.dir / "policy" / "findings.json").write_text(FINDINGS)
        s.start()
        deadline = time.monotonic() + 10
        while "policy warning" not in s.output() and time.monotonic() < deadline:
            time.sleep(0.05)
        lines = [l for l in s.output().splitlines() if "policy warning" in l]
        assert len(lines) == 3, s.output()
        assert "policy/findings.json:6:35: warning: oss:ListObjects acts on a bucket" in lines[1]
    finally:
        s.cleanup()


@pytest.mark.parametrize("role,action,resource,context,code", [
    # The seed's isolated articles: authors in their own space, the editor in anyone's.
    ("author", "s3:PutObject", "arn:aws:s3:::tollgate/articles/ben/dogs", ["aws:username=ben"], 0),
    ("author", "s3:GetObject", "arn:aws:s3:::tollgate/articles/art/dogs", ["aws:username=ben"], 1),
    ("editor", "s3:PutObject", "arn:aws:s3:::tollgate/articles/art/dogs", ["aws:username=eva"], 0),
    ("reader", "s3:DeleteObject", "arn:aws:s3:::tollgate/articles/dee/dogs", ["aws:username=dee"], 1),
    ("reader", "s3:ListBucket", "arn:aws:s3:::tollgate", ["aws:username=dee", "s3:prefix=articles/dee/"], 0),
    ("-", "s3:GetObject", "arn:aws:s3:::tollgate/articles/ben/dogs", [], 1),
])
def test_simulate_answers_for_the_storage_api(tmp_path, role, action, resource, context, code):
    """`--collections ROLE`: the statements config.json's Collections grant a role."""
    (tmp_path / "config.json").write_text(json.dumps({
        "PolicyFile": str(ROOT / "policy/all_policy.txt"), "Buckets": ["tollgate"],
        "Roles": {name: str(ROOT / "policy/all_policy.txt") for name in ("author", "editor", "reader")},
        "Collections": {"articles": {"Type": "isolated", "ReadWrite": ["author"], "ReadOnly": ["reader"],
                                     "ReadWriteAllUsers": ["editor"], "Anonymous": True}},
    }))
    args = ["policy", "simulate", "--config", str(tmp_path / "config.json"), "--collections", role,
            "--action", action, "--resource", resource]
    for pair in context:
        args += ["--context", pair]
    result = tollgate(*args)
    assert result.returncode == code, result.stdout + result.stderr
    assert ("Allow" if code == 0 else "Deny") in result.stdout


def test_simulate_names_an_unknown_collection_role(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"PolicyFile": str(ROOT / "policy/all_policy.txt"), "Buckets": ["tollgate"]}))
    result = tollgate("policy", "simulate", "--config", str(tmp_path / "config.json"), "--collections", "nobody",
                      "--action", "s3:GetObject", "--resource", "arn:aws:s3:::tollgate/x")
    assert result.returncode == 2 and "no role nobody" in result.stderr
