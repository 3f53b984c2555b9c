#!/usr/bin/env python3
"""An independent verifier of imgcheck's attestations, in Python's `cryptography` (Debian's
python3-cryptography) and the standard library only: no imgcheck code.

    verify.py envelope ENVELOPE_FILE PUBLIC_KEY DIGEST
        the DSSE envelope's signature over PAE (DSSE v1.0.0 protocol.md) by the SPKI PEM key,
        an in-toto Statement v1 whose subject has DIGEST and imgcheck's predicate type, and
        whose predicate says DIGEST is the manifest scanned (image.manifestDigest). In the
        registry modes DIGEST must name an image manifest, not an index.
    verify.py registry http://HOST:PORT REPOSITORY DIGEST PUBLIC_KEY COUNT
        the tag sha256-HEX.att of REPOSITORY in cosign's layout (OCI manifest, one layer per
        attestation of application/vnd.dsse.envelope.v1+json with cosign's predicateType and
        signature annotations, each blob matching its digest), holding COUNT attestations, each
        accepted as above.
    verify.py bundle http://HOST:PORT REPOSITORY DIGEST PUBLIC_KEY COUNT
        the Sigstore bundle referrers of DIGEST (cosign's --new-bundle-format layout,
        sigstore/cosign pkg/oci/remote/write.go WriteReferrer): listed by the referrers API or,
        where the registry has none (404), the index at tag sha256-HEX (distribution-spec 1.1);
        COUNT of artifactType application/vnd.dev.sigstore.bundle.v0.3+json, each an OCI
        manifest with the empty config, one bundle layer, subject DIGEST and cosign's
        annotations, its bundle (v0.3, publicKey.hint = base64 SHA-256 of the key's DER) holding
        a DSSE envelope accepted as above.
    verify.py signature http://HOST:PORT REPOSITORY DIGEST PUBLIC_KEY
        the cosign signature of artifact manifest DIGEST (imgcheck rules push --key): the tag
        sha256-HEX.sig holds an OCI manifest whose one layer, of
        application/vnd.dev.cosign.simplesigning.v1+json, is a simple-signing payload naming
        DIGEST, its dev.cosignproject.cosign/signature annotation the base64 ECDSA P-256 SHA-256
        signature of the payload's bytes by the key.
Prints one line per attestation; exits 1 with the reason when any check fails.
"""
import base64
import hashlib
import json
import sys
import urllib.error
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
    # The subject is the manifest the verdict is about: never an index standing for a platform.
    if pred.get("image", {}).get("manifestDigest") != digest:
        fail("the predicate's scanned manifest %r is not the subject %s" % (
            pred.get("image", {}).get("manifestDigest"), digest))
    if pred.get("verdict") not in ("pass", "fail") or not pred["policy"]["identity"]:
        fail("predicate without verdict or policy identity")
    print("verified: %s verdict %s policy %s" % (digest, pred["verdict"],
                                                pred["policy"]["identity"]))


def get(url, accept=None):
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.read(), r.headers.get("Content-Type", "")


BUNDLE_MEDIA = "application/vnd.dev.sigstore.bundle.v0.3+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
SIMPLE_SIGNING = "application/vnd.dev.cosign.simplesigning.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"


def blob_of(base, repo, desc):
    blob, _ = get("%s/v2/%s/blobs/%s" % (base, repo, desc["digest"]))
    if "sha256:" + hashlib.sha256(blob).hexdigest() != desc["digest"] or len(blob) != desc["size"]:
        fail("blob " + desc["digest"] + " does not match its descriptor")
    return blob


def check_image_manifest(base, repo, digest):
    """DIGEST names an image manifest of REPOSITORY (a platform's), not an index."""
    accept = ", ".join([OCI_MANIFEST, OCI_INDEX, DOCKER_MANIFEST, DOCKER_LIST])
    body, ctype = get("%s/v2/%s/manifests/%s" % (base, repo, digest), accept)
    if "sha256:" + hashlib.sha256(body).hexdigest() != digest:
        fail("manifest " + digest + " does not match its digest")
    if ctype not in (OCI_MANIFEST, DOCKER_MANIFEST) or "manifests" in json.loads(body):
        fail("the subject " + digest + " is not an image manifest but " + ctype)


def check_referrer(base, repo, digest, key, entry):
    body, _ = get("%s/v2/%s/manifests/%s" % (base, repo, entry["digest"]), OCI_MANIFEST)
    if "sha256:" + hashlib.sha256(body).hexdigest() != entry["digest"]:
        fail("referrer manifest " + entry["digest"] + " does not match its digest")
    m = json.loads(body)
    if m.get("mediaType") != OCI_MANIFEST or m.get("artifactType") != BUNDLE_MEDIA:
        fail("referrer media/artifact type " + repr((m.get("mediaType"), m.get("artifactType"))))
    c = m["config"]
    if (c["mediaType"], c["size"], c["digest"]) != (
            "application/vnd.oci.empty.v1+json", 2, "sha256:" + hashlib.sha256(b"{}").hexdigest()):
        fail("config is not the OCI empty descriptor: " + repr(c))
    if m["subject"]["digest"] != digest:
        fail("subject " + m["subject"]["digest"] + " is not " + digest)
    ann = m.get("annotations", {})
    if ann.get("dev.sigstore.bundle.content") != "dsse-envelope" or ann.get(
            "dev.sigstore.bundle.predicateType") != PREDICATE or not ann.get(
                "org.opencontainers.image.created"):
        fail("referrer annotations " + repr(ann))
    if len(m["layers"]) != 1 or m["layers"][0]["mediaType"] != BUNDLE_MEDIA:
        fail("layers " + repr(m["layers"]))
    bundle = json.loads(blob_of(base, repo, m["layers"][0]))
    if bundle.get("mediaType") != BUNDLE_MEDIA:
        fail("bundle mediaType " + repr(bundle.get("mediaType")))
    der = key.public_bytes(serialization.Encoding.DER,
                           serialization.PublicFormat.SubjectPublicKeyInfo)
    hint = base64.b64encode(hashlib.sha256(der).digest()).decode()
    if bundle["verificationMaterial"]["publicKey"]["hint"] != hint:
        fail("publicKey.hint is not the key's")
    check_envelope(json.dumps(bundle["dsseEnvelope"]), key, digest)


def check_bundles(base, repo, digest, key, count):
    try:
        body, _ = get("%s/v2/%s/referrers/%s" % (base, repo, digest), OCI_INDEX)
        print("listed by the referrers API")
    except urllib.error.HTTPError as e:
        if e.code != 404:
            raise
        body, ctype = get("%s/v2/%s/manifests/%s" % (base, repo, digest.replace(":", "-")),
                          OCI_INDEX)
        if ctype != OCI_INDEX:
            fail("the referrers tag holds " + ctype)
        print("listed at the referrers tag")
    entries = [e for e in json.loads(body)["manifests"] if e.get("artifactType") == BUNDLE_MEDIA]
    if len(entries) != int(count):
        fail("%d bundle referrers, not %s" % (len(entries), count))
    for e in entries:
        check_referrer(base, repo, digest, key, e)


def check_signature(base, repo, digest, key):
    tag = digest.replace(":", "-") + ".sig"  # cosign's SignatureTag
    body, ctype = get("%s/v2/%s/manifests/%s" % (base, repo, tag), OCI_MANIFEST)
    m = json.loads(body)
    if ctype != OCI_MANIFEST or m["config"]["mediaType"] != "application/vnd.oci.image.config.v1+json":
        fail("the .sig manifest is %s with config %s" % (ctype, m["config"]["mediaType"]))
    if len(m["layers"]) != 1 or m["layers"][0]["mediaType"] != SIMPLE_SIGNING:
        fail("layers " + repr(m["layers"]))
    layer = m["layers"][0]
    payload = blob_of(base, repo, layer)
    sig = base64.b64decode(layer["annotations"]["dev.cosignproject.cosign/signature"],
                           validate=True)
    try:
        key.verify(sig, payload, ec.ECDSA(hashes.SHA256()))
    except Exception:  # InvalidSignature, or a malformed DER
        fail("the signature does not verify")
    critical = json.loads(payload)["critical"]
    if critical["type"] != "cosign container image signature" or \
            critical["image"]["docker-manifest-digest"] != digest:
        fail("the payload is not a signature of " + digest + ": " + repr(critical))
    print("verified: signature of %s by the key" % digest)


def main():
    if sys.argv[1] == "envelope":
        _, _, path, pub, digest = sys.argv
        key = serialization.load_pem_public_key(open(pub, "rb").read())
        check_envelope(open(path, "rb").read(), key, digest)
        return
    if sys.argv[1] == "signature":
        _, _, base, repo, digest, pub = sys.argv
        check_signature(base, repo, digest,
                        serialization.load_pem_public_key(open(pub, "rb").read()))
        return
    _, mode, base, repo, digest, pub, count = sys.argv
    key = serialization.load_pem_public_key(open(pub, "rb").read())
    if mode == "bundle":
        check_image_manifest(base, repo, digest)
        check_bundles(base, repo, digest, key, count)
        return
    check_image_manifest(base, repo, digest)
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
