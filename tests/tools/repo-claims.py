#!/usr/bin/env python3
"""repo-claims.py SOURCE_DIR: small claims of the repository that are true.

  * venv/, which README.md tells users to create, is ignored by git;
  * CI builds with warnings as errors: `make` under CI=true configures with
    -DCLBOUND_WERROR=ON (and .ci/run sets CI=true);
  * docs/api.md says which public structs have an `_init` function: every struct
    with a struct_size field is named there, those without one as having none;
  * clbound/dataops.h says what reading an overflowed output gives (the error,
    not the first `bound` rows)."""
import os
import re
import subprocess
import sys


def main():
    src = sys.argv[1]
    bad = []
    ignore = open(os.path.join(src, ".gitignore")).read().split()
    if not any(p in ("venv/", "/venv/", "venv") for p in ignore):
        bad.append(".gitignore does not ignore venv/")
    ci = open(os.path.join(src, ".ci", "run")).read()
    if "CI=" not in ci.replace('"', "").replace("${CI:-true}", "true"):
        bad.append(".ci/run does not set CI")
    dry = subprocess.run(["make", "-s", "-n", "-C", src, "configure", "CI=true", "BUILD=/nonexistent-build"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout.decode()
    if "-DCLBOUND_WERROR=ON" not in dry:
        bad.append("make under CI=true does not configure with -DCLBOUND_WERROR=ON")
    dry = subprocess.run(["make", "-s", "-n", "-C", src, "configure", "CI=false", "BUILD=/nonexistent-build"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout.decode()
    if "-DCLBOUND_WERROR=ON" in dry:
        bad.append("make outside CI configures with -DCLBOUND_WERROR=ON")

    inc = os.path.join(src, "include", "clbound")
    headers = "".join(open(os.path.join(inc, f)).read() for f in sorted(os.listdir(inc)) if f.endswith(".h"))
    api = open(os.path.join(src, "docs", "api.md")).read()
    para = next((p for p in api.split("\n- ") if "struct_size" in p), "")
    for m in re.finditer(r"typedef struct (clb_\w+) \{(.*?)\} \1;", headers, re.S):
        name, body = m.group(1), m.group(2)
        if "struct_size" not in body:
            continue
        init = re.search(r"\b%s_init\s*\(" % name, headers) is not None
        if "`%s`" % name not in para and "`%s_init`" % name not in para:
            bad.append("docs/api.md does not say whether %s has an _init function" % name)
        elif init and "%s_init" % name not in para:
            bad.append("docs/api.md does not name %s_init" % name)
        elif not init and "`%s`" % name not in para:
            bad.append("docs/api.md does not list %s among the structs without _init" % name)
    if re.search(r"have an\s+`_init` function, so they", para):
        bad.append("docs/api.md claims an _init for every struct")

    dataops = open(os.path.join(inc, "dataops.h")).read()
    m = re.search(r"CLB_ERR_BOUND_EXCEEDED: the count is larger(.*?)\* - CLB_ERR_SHORT_SOURCE", dataops, re.S)
    if not m or "clb_tensor_read" not in m.group(1) or "marked failed" not in m.group(1):
        bad.append("dataops.h does not say that reading an overflowed output returns CLB_ERR_BOUND_EXCEEDED")
    report = "\n".join("repo-claims: FAIL: " + b for b in bad) or "repo-claims: ok"
    print(report, file=sys.stderr if bad else sys.stdout)
    return int(bool(bad))


if __name__ == "__main__":
    sys.exit(main())
