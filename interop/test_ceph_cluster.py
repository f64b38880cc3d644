"""The test cluster itself (`.ci/ceph/cluster.sh`): RGW answers S3 with the admin user, small
multipart parts (OSS's 100 KiB minimum) are accepted, and STS is on."""
import json

import boto3


def test_rgw_serves_s3_with_small_parts_and_sts(rgw):
    s3 = rgw.s3()
    s3.create_bucket(Bucket="cluster-check")
    try:
        s3.put_object(Bucket="cluster-check", Key="a", Body=b"hello")
        assert s3.get_object(Bucket="cluster-check", Key="a")["Body"].read() == b"hello"
        upload = s3.create_multipart_upload(Bucket="cluster-check", Key="m")["UploadId"]
        parts = []
        for number, body in ((1, b"x" * 100 * 1024), (2, b"y" * 10)):
            etag = s3.upload_part(Bucket="cluster-check", Key="m", UploadId=upload, PartNumber=number, Body=body)["ETag"]
            parts.append({"PartNumber": number, "ETag": etag})
        s3.complete_multipart_upload(Bucket="cluster-check", Key="m", UploadId=upload, MultipartUpload={"Parts": parts})
        assert s3.head_object(Bucket="cluster-check", Key="m")["ContentLength"] == 100 * 1024 + 10

        keys = dict(endpoint_url=rgw.endpoint, region_name=rgw.region,
                    aws_access_key_id=rgw.access_key, aws_secret_access_key=rgw.secret_key)
        iam = boto3.client("iam", **keys)
        # RGW 16 does not decode a `+` in a form body as a space: no spaces in the documents.
        trust = json.dumps({"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Principal": {"AWS": [f"arn:aws:iam:::user/{rgw.env['RGW_ADMIN_UID']}"]},
            "Action": ["sts:AssumeRole"]}]}, separators=(",", ":"))
        role = iam.create_role(RoleName="cluster-check", Path="/", AssumeRolePolicyDocument=trust)["Role"]
        try:
            iam.put_role_policy(RoleName="cluster-check", PolicyName="read", PolicyDocument=json.dumps({
                "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:GetObject",
                                                        "Resource": "arn:aws:s3:::cluster-check/*"}]}, separators=(",", ":")))
            credentials = boto3.client("sts", **keys).assume_role(RoleArn=role["Arn"], RoleSessionName="check")["Credentials"]
            temporary = boto3.client("s3", endpoint_url=rgw.endpoint, region_name=rgw.region,
                                     aws_access_key_id=credentials["AccessKeyId"],
                                     aws_secret_access_key=credentials["SecretAccessKey"],
                                     aws_session_token=credentials["SessionToken"])
            assert temporary.get_object(Bucket="cluster-check", Key="a")["Body"].read() == b"hello"
        finally:
            iam.delete_role_policy(RoleName="cluster-check", PolicyName="read")
            iam.delete_role(RoleName="cluster-check")
    finally:
        for key in ("a", "m"):
            s3.delete_object(Bucket="cluster-check", Key=key)
        s3.delete_bucket(Bucket="cluster-check")
