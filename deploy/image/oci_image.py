#!/usr/bin/env python3
"""Packs layer tarballs into an OCI image archive, with no registry and no daemon.

    oci_image.py --name localhost/tessera:0.1.0 --layer base.tar --layer app.tar \
        --entrypoint '["/usr/bin/tessera"]' --cmd '["--help"]' --env K=V --label K=V \
        --output tessera.oci.tar

The archive is an OCI image layout (oci-layout, index.json, blobs/sha256/...)
that `ctr images import` (containerd), `skopeo copy oci-archive:...` or
`podman load` read. Layers are kept uncompressed (their digest is then also
their diff id); the image is named in index.json with both annotations
containerd and the OCI spec use. The same inputs give the same archive,
byte for byte: blobs are written with fixed times and owners.

Formats: OCI image spec v1.1, image-layout.md, manifest.md, config.md
(github.com/opencontainers/image-spec).
"""
import argparse
import hashlib
import io
import json
import os
import sys
import tarfile

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER = "application/vnd.oci.image.layer.v1.tar"


def fail(message):
    print(f"oci_image: error: {message}", file=sys.stderr)
    sys.exit(1)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest(), os.path.getsize(path)


def json_array(text, flag):
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        fail(f"{flag} {text!r}: not JSON ({e})")
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        fail(f"{flag} {text!r}: expected a JSON array of strings")
    return value


def key_value(text, flag):
    if "=" not in text or text.startswith("="):
        fail(f"{flag} {text!r}: expected KEY=VALUE")
    return text.split("=", 1)


def add_bytes(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    info.mtime = 0
    tar.addfile(info, io.BytesIO(data))


def add_file(tar, name, path):
    info = tarfile.TarInfo(name)
    info.size = os.path.getsize(path)
    info.mode = 0o644
    info.mtime = 0
    with open(path, "rb") as f:
        tar.addfile(info, f)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--name", required=True, help="image reference, e.g. localhost/tessera:0.1.0")
    p.add_argument("--layer", action="append", default=[], help="a layer tarball, bottom first (repeat)")
    p.add_argument("--entrypoint", help="JSON array")
    p.add_argument("--cmd", help="JSON array")
    p.add_argument("--env", action="append", default=[], help="KEY=VALUE (repeat)")
    p.add_argument("--label", action="append", default=[], help="KEY=VALUE (repeat)")
    p.add_argument("--workdir")
    p.add_argument("--arch", default="amd64")
    p.add_argument("--output", required=True, help="the archive to write (replaced atomically)")
    a = p.parse_args()

    if ":" not in a.name.rsplit("/", 1)[-1]:
        fail(f"--name {a.name!r}: give a tag (NAME:TAG)")
    if not a.layer:
        fail("no --layer given")
    layers = []
    for path in a.layer:
        if not os.path.isfile(path):
            fail(f"--layer {path!r}: no such file")
        try:
            with tarfile.open(path, "r:") as t:
                t.next()
        except tarfile.TarError as e:
            fail(f"--layer {path!r}: not an uncompressed tar file ({e})")
        digest, size = sha256_file(path)
        layers.append((path, digest, size))

    config = {"Env": [f"{k}={v}" for k, v in (key_value(e, "--env") for e in a.env)]}
    if not any(e.startswith("PATH=") for e in config["Env"]):
        config["Env"].insert(0, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    if a.entrypoint:
        config["Entrypoint"] = json_array(a.entrypoint, "--entrypoint")
    if a.cmd:
        config["Cmd"] = json_array(a.cmd, "--cmd")
    if a.workdir:
        config["WorkingDir"] = a.workdir
    if a.label:
        config["Labels"] = dict(key_value(l, "--label") for l in a.label)
    image_config = {
        "architecture": a.arch,
        "os": "linux",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{d}" for _, d, _ in layers]},
        "history": [{"created_by": f"layer {os.path.basename(path)}"} for path, _, _ in layers],
    }
    config_bytes = json.dumps(image_config, sort_keys=True, separators=(",", ":")).encode()
    config_digest = hashlib.sha256(config_bytes).hexdigest()
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "config": {"mediaType": CONFIG, "digest": f"sha256:{config_digest}", "size": len(config_bytes)},
        "layers": [{"mediaType": LAYER, "digest": f"sha256:{d}", "size": s} for _, d, s in layers],
    }
    manifest_bytes = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    manifest_digest = hashlib.sha256(manifest_bytes).hexdigest()
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": MANIFEST,
            "digest": f"sha256:{manifest_digest}",
            "size": len(manifest_bytes),
            "platform": {"architecture": a.arch, "os": "linux"},
            "annotations": {"io.containerd.image.name": a.name, "org.opencontainers.image.ref.name": a.name},
        }],
    }

    tmp = a.output + ".tmp"
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as out:
        add_bytes(out, "oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode())
        add_bytes(out, "index.json", json.dumps(index, sort_keys=True).encode())
        add_bytes(out, f"blobs/sha256/{manifest_digest}", manifest_bytes)
        add_bytes(out, f"blobs/sha256/{config_digest}", config_bytes)
        written = set()
        for path, digest, _ in layers:
            if digest not in written:
                add_file(out, f"blobs/sha256/{digest}", path)
                written.add(digest)
    os.replace(tmp, a.output)
    print(f"sha256:{manifest_digest}")


if __name__ == "__main__":
    main()
