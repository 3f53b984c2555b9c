#!/usr/bin/env python3
"""docker/kubernetes/*.yaml against the published schemas of the policy engines they configure.

Each document whose apiVersion and kind have a schema in testdata/kubernetes (a CRD's
openAPIV3Schema, tools/crd_schema.py) is validated as the API server would with kubectl's
strict field validation: an unknown field is an error unless the schema preserves unknown
fields there. The attestation policies must ask for the predicate type imgcheck writes
(src/attest/statement.h). The webhook configurations (admissionregistration.k8s.io/v1, whose
OpenAPI schema has no enums) must hold values the API server accepts, call paths serve routes
(src/serve/server.cpp), and the mutating one (digest pinning) must be reinvoked IfNeeded and
reach the validating one's Service with the same TLS. Exit 1 with one line per problem.

    tests/k8s_policies_check.py SOURCE_DIR
"""
import glob
import json
import os
import re
import sys

import jsonschema
import yaml


def strict(node):
    """The schema as kubectl --validate=strict applies it, in JSON Schema terms."""
    if isinstance(node, list):
        return [strict(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: strict(v) for k, v in node.items()}
    if "properties" in out and "additionalProperties" not in out and \
            not out.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    if out.pop("x-kubernetes-int-or-string", False):
        out = {"anyOf": [{"type": "integer"}, {"type": "string"}],
               **{k: v for k, v in out.items() if k != "type"}}
    if out.pop("nullable", False) and "type" in out:
        out["type"] = [out["type"], "null"]
    return out


# What the API server's validation accepts where the OpenAPI schema says "string".
WEBHOOK_VALUES = {"failurePolicy": {"Ignore", "Fail"}, "sideEffects": {"None", "NoneOnDryRun"},
                  "matchPolicy": {"Exact", "Equivalent"}, "reinvocationPolicy": {"Never", "IfNeeded"}}


def check_webhooks(docs, routes, schemas):
    """Problems of the ValidatingWebhookConfiguration and MutatingWebhookConfiguration."""
    problems = []
    hooks = {}
    for name, doc in docs:
        kind = doc.get("kind")
        if kind not in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
            continue
        where = "%s: %s %s" % (name, kind, doc["metadata"].get("name"))
        for hook in doc.get("webhooks", []):
            hooks.setdefault(kind, []).append((where, doc, hook))
            for field, allowed in WEBHOOK_VALUES.items():
                if field in hook and hook[field] not in allowed:
                    problems.append("%s: %s %r is not one of %s" % (where, field, hook[field],
                                                                     sorted(allowed)))
            path = hook.get("clientConfig", {}).get("service", {}).get("path")
            if path not in routes:
                problems.append("%s: path %s is not a route of serve (%s)" % (
                    where, path, ", ".join(sorted(routes))))
    validating = hooks.get("ValidatingWebhookConfiguration", [])
    mutating = hooks.get("MutatingWebhookConfiguration", [])
    if len(validating) != 1 or len(mutating) != 1:
        return problems + ["expected one validating and one mutating webhook, found %d and %d" % (
            len(validating), len(mutating))]
    (_, vdoc, vhook), (where, mdoc, mhook) = validating[0], mutating[0]
    if mhook.get("reinvocationPolicy") != "IfNeeded":
        problems.append("%s: reinvocationPolicy must be IfNeeded (another webhook may change an "
                        "image after it)" % where)
    service = {k: v for k, v in mhook["clientConfig"]["service"].items() if k != "path"}
    vservice = {k: v for k, v in vhook["clientConfig"]["service"].items() if k != "path"}
    if service != vservice:
        problems.append("%s: service %s, the validating webhook's is %s" % (where, service, vservice))
    ca = "cert-manager.io/inject-ca-from"
    if mdoc["metadata"].get("annotations", {}).get(ca) != vdoc["metadata"].get("annotations", {}).get(ca):
        problems.append("%s: %s differs from the validating webhook's" % (where, ca))
    if mhook.get("rules") != vhook.get("rules"):
        problems.append("%s: rules differ from the validating webhook's (an object judged must be "
                        "pinned)" % where)
    # The schema check must bite: the mutating document with an unknown field fails it.
    key = (mdoc["apiVersion"], mdoc["kind"])
    if key not in schemas:
        problems.append("%s: no schema for %s %s" % (where, key[0], key[1]))
    else:
        broken = json.loads(json.dumps(mdoc))
        broken["webhooks"][0]["reinvocation"] = "IfNeeded"
        if not list(jsonschema.Draft7Validator(schemas[key][0]).iter_errors(broken)):
            problems.append("%s: the schema accepts an unknown field (webhooks[0].reinvocation)" % where)
    return problems


def main():
    src = sys.argv[1]
    schemas = {}
    for path in glob.glob(os.path.join(src, "testdata/kubernetes/*.schema.json")):
        with open(path) as f:
            s = json.load(f)
        root = s["schema"]
        # Every object has these, whether or not its CRD's schema lists them.
        for field, kind in (("apiVersion", "string"), ("kind", "string"), ("metadata", "object")):
            root.setdefault("properties", {}).setdefault(field, {"type": kind})
        schemas[(s["apiVersion"], s["kind"])] = (strict(root), os.path.basename(path))
    with open(os.path.join(src, "src/attest/statement.h")) as f:
        predicate = re.search(r'kPredicateType =\s*"([^"]+)"', f.read()).group(1)

    with open(os.path.join(src, "src/serve/server.cpp")) as f:
        routes = set(re.findall(r'Route\("POST", "([^"]+)"', f.read()))

    problems, checked, attestations, every = [], 0, 0, []
    for path in sorted(glob.glob(os.path.join(src, "docker/kubernetes/*.yaml"))):
        name = os.path.relpath(path, src)
        with open(path) as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
        every += [(name, d) for d in docs]
        for doc in docs:
            key = (doc.get("apiVersion"), doc.get("kind"))
            if key not in schemas:
                continue
            schema, schema_file = schemas[key]
            checked += 1
            where = "%s: %s %s" % (name, doc["kind"], doc.get("metadata", {}).get("name"))
            for e in jsonschema.Draft7Validator(schema).iter_errors(doc):
                problems.append("%s: %s at %s (%s)" % (
                    where, e.message, "/".join(str(p) for p in e.absolute_path), schema_file))
            text = json.dumps(doc)
            for t in re.findall(r'"(?:type|predicateType)": "(https://[^"]*imgcheck[^"]*)"', text):
                attestations += 1
                if t != predicate:
                    problems.append("%s: predicate type %s, imgcheck writes %s" % (where, t, predicate))
    problems += check_webhooks(every, routes, schemas)
    if checked == 0 or attestations < 2:
        problems.append("%d documents had a schema and %d asked for imgcheck's attestations; "
                        "expected the Kyverno and policy-controller policies" % (checked, attestations))
    for p in problems:
        print(p)
    if problems:
        return 1
    print("k8s_policies_check: %d documents valid against %d schemas, %d ask for imgcheck's "
          "predicate type; the mutating webhook pins through the validating one's Service" % (
              checked, len(schemas), attestations))
    return 0


if __name__ == "__main__":
    sys.exit(main())
