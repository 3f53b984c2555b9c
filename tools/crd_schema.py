#!/usr/bin/env python3
"""The openAPIV3Schema of one version of a CustomResourceDefinition, as a small JSON file for
tests/k8s_policies_check.py: descriptions removed (most of the bytes), the source recorded.

    tools/crd_schema.py CRD.yaml VERSION SOURCE > testdata/kubernetes/NAME.schema.json

SOURCE says where CRD.yaml came from (repository, commit, path). Run by a maintainer when a
policy engine's CRD changes; the tests never download.
"""
import json
import sys

import yaml


def strip(node):
    if isinstance(node, dict):
        return {k: strip(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [strip(v) for v in node]
    return node


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    path, version, source = sys.argv[1:]
    with open(path) as f:
        crd = next(d for d in yaml.safe_load_all(f) if d and d.get("kind") == "CustomResourceDefinition")
    spec = crd["spec"]
    for v in spec["versions"]:
        if v["name"] == version:
            out = {"source": source, "apiVersion": spec["group"] + "/" + version,
                   "kind": spec["names"]["kind"], "schema": strip(v["schema"]["openAPIV3Schema"])}
            json.dump(out, sys.stdout, separators=(",", ":"), sort_keys=True)
            print()
            return 0
    print("crd_schema.py: %s has no version %s" % (path, version), file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
