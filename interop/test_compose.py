"""compose.yaml, checked without a Docker engine: its parts agree with the Dockerfile, and the
config it mounts loads in the real binary."""
import ipaddress
import json
import re
import subprocess

import yaml

from conftest import ROOT, binary

COMPOSE = yaml.safe_load((ROOT / "compose.yaml").read_text())
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def test_tollgate_keeps_its_data_in_the_images_volume():
    volume = re.search(r"^VOLUME (\S+)$", DOCKERFILE, re.M).group(1)
    tollgate = COMPOSE["services"]["tollgate"]
    assert f"tollgate-data:{volume}" in tollgate["volumes"]
    assert "tollgate-data" in COMPOSE["volumes"]


def test_the_root_secret_is_a_docker_secret_file():
    tollgate = COMPOSE["services"]["tollgate"]
    [name] = tollgate["secrets"]
    assert tollgate["environment"]["TOLLGATE_ACCESS_KEY_SECRET_FILE"] == f"/run/secrets/{name}"
    assert "file" in COMPOSE["secrets"][name]
    assert "TOLLGATE_ACCESS_KEY_SECRET" not in tollgate["environment"]


def test_the_mounted_config_loads_and_trusts_the_proxy_network(tmp_path):
    tollgate = COMPOSE["services"]["tollgate"]
    [mount] = tollgate["configs"]
    assert mount["target"] == re.search(r"TOLLGATE_CONFIG=(\S+)", DOCKERFILE).group(1)
    text = COMPOSE["configs"][mount["source"]]["content"]
    config = json.loads(text)
    [subnet] = [c["subnet"] for c in COMPOSE["networks"]["default"]["ipam"]["config"]]
    assert any(ipaddress.ip_network(subnet).subnet_of(ipaddress.ip_network(cidr)) for cidr in config["TrustedProxies"])
    # The real binary reads it, with the image's policies beside it.
    (tmp_path / "config.json").write_text(text)
    subprocess.run(["cp", "-r", str(ROOT / "policy"), str(tmp_path / "policy")], check=True)
    result = subprocess.run([binary(), "token", "issue"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                            env={"TOLLGATE_CONFIG": str(tmp_path / "config.json"), "TOLLGATE_DATA_DIR": str(tmp_path / "data")})
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["StatusCode"] == 200


def test_the_tls_proxy_forwards_to_tollgates_ports():
    caddyfile = COMPOSE["configs"]["caddyfile"]["content"]
    config = json.loads(COMPOSE["configs"]["tollgate_config"]["content"])
    assert f"reverse_proxy tollgate:{config.get('Port', 7080)}" in caddyfile
    assert f"reverse_proxy tollgate:{config.get('GatewayPort', 9000)}" in caddyfile
    tls = COMPOSE["services"]["tls"]
    assert tls["depends_on"]["tollgate"]["condition"] == "service_healthy"
    assert "443:443" in tls["ports"]


# MARK: compose.cluster.yaml: stateless instances over RGW

CLUSTER = yaml.safe_load((ROOT / "compose.cluster.yaml").read_text())


def test_cluster_instances_share_one_config_and_root_secret():
    instances = [name for name in CLUSTER["services"] if name.startswith("tollgate-")]
    assert len(instances) >= 2
    first = CLUSTER["services"][instances[0]]
    for name in instances[1:]:
        service = CLUSTER["services"][name]
        assert service["configs"] == first["configs"] and service["secrets"] == first["secrets"]
        assert service["environment"] == first["environment"]
    # No instance keeps a volume: nothing it needs lives on its own disk.
    assert all("volumes" not in CLUSTER["services"][name] for name in instances)


def test_cluster_config_loads_with_the_s3_backend(tmp_path):
    text = CLUSTER["configs"]["tollgate_config"]["content"]
    config = json.loads(text)
    storage = config["Storage"]
    assert storage["Backend"] == "s3" and storage["Endpoint"] == "http://rgw:7480"
    secrets = CLUSTER["secrets"]
    for key in ("AccessKeyIDFile", "AccessKeySecretFile"):
        name = storage[key].removeprefix("/run/secrets/")
        assert name in secrets and name in CLUSTER["services"]["rgw"]["secrets"]
        storage[key] = str(tmp_path / name)
        (tmp_path / name).write_text("key-of-" + name)
    (tmp_path / "config.json").write_text(json.dumps(config))
    subprocess.run(["cp", "-r", str(ROOT / "policy"), str(tmp_path / "policy")], check=True)
    result = subprocess.run([binary(), "token", "issue"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                            env={"TOLLGATE_CONFIG": str(tmp_path / "config.json"), "TOLLGATE_DATA_DIR": str(tmp_path / "data"),
                                 "TOLLGATE_ACCESS_KEY_SECRET": "cluster-root-secret-0123456789abcdefghijkl"})
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["StatusCode"] == 200
    assert "key-of-" not in result.stdout + result.stderr


def test_cluster_balancer_spreads_over_every_instance():
    caddyfile = CLUSTER["configs"]["caddyfile"]["content"]
    instances = [name for name in CLUSTER["services"] if name.startswith("tollgate-")]
    for port in (7080, 9000):
        line = next(line for line in caddyfile.splitlines() if line.strip().startswith("reverse_proxy") and f":{port}" in line)
        assert all(f"{name}:{port}" in line for name in instances)
    config = json.loads(CLUSTER["configs"]["tollgate_config"]["content"])
    [subnet] = [c["subnet"] for c in CLUSTER["networks"]["default"]["ipam"]["config"]]
    assert any(ipaddress.ip_network(subnet).subnet_of(ipaddress.ip_network(cidr)) for cidr in config["TrustedProxies"])
