"""A plain S3 client (boto3) for the snapshot tests, run inside the sandbox's network.

  setup URL BUCKET                 an IAM user allowed everything, its access key, a bucket;
                                   prints {"id": ..., "secret": ...}
  put URL ID SECRET BUCKET KEY UID  a small object carrying etcd-snapshot-uid=UID
  head URL ID SECRET BUCKET KEY     prints {"size", "sha256", "metadata"} (streamed read)
  get URL ID SECRET BUCKET KEY OUT  downloads the object to OUT
  uploads URL ID SECRET BUCKET      prints the number of unfinished multipart uploads
  upload URL ID SECRET BUCKET KEY FILE   uploads FILE (boto3's managed multipart upload)
  delete URL ID SECRET BUCKET KEY   deletes the object
"""
import hashlib
import json
import sys

import boto3
from botocore.config import Config


def s3(url, key_id, secret):
    return boto3.client(
        "s3",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id=key_id,
        aws_secret_access_key=secret,
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )


def main(argv):
    command, url = argv[1], argv[2]
    if command == "setup":
        bucket = argv[3]
        iam = boto3.client(
            "iam",
            endpoint_url=url,
            region_name="us-east-1",
            aws_access_key_id="bootstrap",
            aws_secret_access_key="bootstrap",
        )
        iam.create_user(UserName="backup")
        iam.put_user_policy(
            UserName="backup",
            PolicyName="all",
            PolicyDocument=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
                }
            ),
        )
        key = iam.create_access_key(UserName="backup")["AccessKey"]
        s3(url, key["AccessKeyId"], key["SecretAccessKey"]).create_bucket(Bucket=bucket)
        print(json.dumps({"id": key["AccessKeyId"], "secret": key["SecretAccessKey"]}))
        return
    client = s3(url, argv[3], argv[4])
    bucket, key = argv[5], argv[6] if len(argv) > 6 else None
    if command == "put":
        client.put_object(
            Bucket=bucket, Key=key, Body=b"not a snapshot", Metadata={"etcd-snapshot-uid": argv[7]}
        )
    elif command == "head":
        body = client.get_object(Bucket=bucket, Key=key)
        digest, size = hashlib.sha256(), 0
        for chunk in body["Body"].iter_chunks(1 << 20):
            digest.update(chunk)
            size += len(chunk)
        print(json.dumps({"size": size, "sha256": digest.hexdigest(), "metadata": body["Metadata"]}))
    elif command == "get":
        client.download_file(bucket, key, argv[7])
    elif command == "upload":
        client.upload_file(argv[7], bucket, key)
    elif command == "delete":
        client.delete_object(Bucket=bucket, Key=key)
    elif command == "uploads":
        print(len(client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])))


if __name__ == "__main__":
    main(sys.argv)
