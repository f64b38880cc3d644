"""What a gateway on the S3 backend over Ceph RGW 16 does differently from one on the local
store, as the interop suites see it: the one list of expected differences. Each entry is a test
of a module that runs on both backends (`ON_RGW_TOO`), marked as an expected failure on RGW
only, strictly (one that starts to pass fails the run, so the list stays true), with the reason.
Everything else those suites check holds on both.
"""

EXPECTED: dict[str, str] = {
    # RGW 16 completes a multipart upload only with its parts in sequence from the first one
    # uploaded (it walks the listed and the uploaded parts side by side): completing with parts
    # 1, 2 and 4 of 1-4 is its InvalidPart, which the gateway answers 501 NotImplemented, naming
    # the limit (every part listed is there, with its ETag).
    "test_s3_gateway.py::test_multipart_errors": "a completion leaving out an uploaded part is NotImplemented",
}
