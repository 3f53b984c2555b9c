#!/usr/bin/env python3
"""An independent verifier of imgcheck's attestations, in Python's `cryptography` (Debian's
python3-cryptography) and the standard library only: no imgcheck code.

    verify.py envelope ENVELOPE_FILE PUBLIC_KEY DIGEST
        the DSSE envelope's signature over PAE (DSSE v1.0.0 protocol.md) by the SPKI PEM key,
        an in-toto Statement v1 whose subject has DIGEST and imgcheck's predicate type.
    verify.py registry http://HOST:PORT REPOSITORY DIGEST PUBLIC_KEY COUNT
        the tag sha256-HEX.att of REPOSITORY in cosign's layout (OCI manifest, one layer per
        attestation of application/vnd.dsse.envelope.v1+json with cosign's predicateType and
        signature annotations, each blob matching its digest), holding COUNT attestations, each
        accepted as above.
Prints one line per attestation; exits 1 with the reason when any check fails.
"""
import base64
import hashlib
import json
import sys
import urllib.request

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

PREDICATE = "https://github.com/imgcheck/imgcheck/attestation/verdict/v1"
DSSE_MEDIA = "application/vnd.dsse.envelope.v1+json"


def fail(why):
    print("REFUSED: " + why)
    sys.exit(1)


def pae(payload_type, body):
    t = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(body), body)


def check_envelope(raw, key, digest):
    env = json.loads(raw)
    if env.get("payloadType") != "application/vnd.in-toto+json":
        fail("payloadType " + repr(env.get("payloadType")))
    body = base64.b64decode(env["payload"], validate=True)
    verified = False
    for s in env["signatures"]:
        try:
            key.verify(base64.b64decode(s["sig"], validate=True), pae(env["payloadType"], body),
                       ec.ECDSA(hashes.SHA256()))
            verified = True
        except Exception:  # InvalidSignature, or a malformed DER
            pass
    if not verified:
        fail("no signature verifies")
    st = json.loads(body)
    if st.get("_type") != "https://in-toto.io/Statement/v1":
        fail("_type " + repr(st.get("_type")))
    if st.get("predicateType") != PREDICATE:
        fail("predicateType " + repr(st.get("predicateType")))
    hexes = [s.get("digest", {}).get("sha256") for s in st.get("subject", [])]
    if digest.split(":", 1)[1] not in hexes:
        fail("subject " + repr(hexes) + " is not " + digest)
    pred = st["predicate"]
    if pred.get("verdict") not in ("pass", "fail") or not pred["policy"]["identity"]:
        fail("predicate without verdict or policy identity")
    print("verified: %s verdict %s policy %s" % (digest, pred["verdict"],
                                                pred["policy"]["identity"]))


def get(url, accept=None):
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.read(), r.headers.get("Content-Type", "")


def main():
    if sys.argv[1] == "envelope":
        _, _, path, pub, digest = sys.argv
        key = serialization.load_pem_public_key(open(pub, "rb").read())
        check_envelope(open(path, "rb").read(), key, digest)
        return
    _, _, base, repo, digest, pub, count = sys.argv
    key = serialization.load_pem_public_key(open(pub, "rb").read())
    tag = digest.replace(":", "-") + ".att"  # cosign's AttestationTag
    body, ctype = get("%s/v2/%s/manifests/%s" % (base, repo, tag),
                      "application/vnd.oci.image.manifest.v1+json")
    m = json.loads(body)
    if ctype != "application/vnd.oci.image.manifest.v1+json" or m.get("schemaVersion") != 2:
        fail("the .att manifest is " + ctype)
    if m["config"]["mediaType"] != "application/vnd.oci.image.config.v1+json":
        fail("config media type " + m["config"]["mediaType"])
    if len(m["layers"]) != int(count):
        fail("%d layers, not %s" % (len(m["layers"]), count))
    for layer in m["layers"]:
        if layer["mediaType"] != DSSE_MEDIA:
            fail("layer media type " + layer["mediaType"])
        ann = layer.get("annotations", {})
        if ann.get("predicateType") != PREDICATE or ann.get(
                "dev.cosignproject.cosign/signature") != "":
            fail("layer annotations " + repr(ann))
        blob, _ = get("%s/v2/%s/blobs/%s" % (base, repo, layer["digest"]))
        if "sha256:" + hashlib.sha256(blob).hexdigest() != layer["digest"] or len(
                blob) != layer["size"]:
            fail("blob " + layer["digest"] + " does not match its descriptor")
        check_envelope(blob, key, digest)


main()
