"""Plain clients of the GCS and Azure Blob emulators for the snapshot-store tests, run where the
emulator is reachable (the sandbox's network, or the host for loopback tests).

GCS (fake-gcs-server): its JSON API over plain HTTP (the API any GCS client speaks; the
emulator checks no credentials).
  gcs-setup URL BUCKET               creates the bucket
  gcs-head URL BUCKET KEY            prints {"size", "sha256", "metadata"} (streamed read), or
                                     exits 3 when there is no such object
  gcs-get URL BUCKET KEY OUT         downloads the object to OUT
  gcs-put URL BUCKET KEY UID         a small object carrying etcd-snapshot-uid=UID
  gcs-put-file URL BUCKET KEY FILE   uploads FILE
  gcs-list URL BUCKET                prints the object names, one a line

Azure Blob (Azurite): the Azure SDK (azure-storage-blob) with the account key of the
connection string CONN.
  azure-setup CONN CONTAINER         creates the container
  azure-head CONN CONTAINER KEY      as gcs-head (exit 3: no such blob)
  azure-get CONN CONTAINER KEY OUT
  azure-put CONN CONTAINER KEY UID   a small blob carrying etcd_snapshot_uid=UID
  azure-put-file CONN CONTAINER KEY FILE
  azure-list CONN CONTAINER          prints the blob names, one a line
  azure-sas CONN CONTAINER           prints a SAS token (read, write, create, delete, list; an hour)
"""
import hashlib
import json
import sys
import urllib.error
import urllib.parse
import urllib.request

ABSENT = 3


def quote(name):
    return urllib.parse.quote(name, safe="")


def http(method, url, body=None, headers=None):
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    return urllib.request.urlopen(request, timeout=30)


def digest(chunks):
    sha, size = hashlib.sha256(), 0
    for chunk in chunks:
        sha.update(chunk)
        size += len(chunk)
    return size, sha.hexdigest()


def read_chunks(response):
    while True:
        chunk = response.read(1 << 20)
        if not chunk:
            return
        yield chunk


def gcs(command, url, argv):
    bucket = argv[0]
    objects = f"{url}/storage/v1/b/{quote(bucket)}/o"
    if command == "gcs-setup":
        http(
            "POST",
            f"{url}/storage/v1/b",
            json.dumps({"name": bucket}).encode(),
            {"Content-Type": "application/json"},
        ).read()
    elif command == "gcs-head":
        try:
            meta = json.load(http("GET", f"{objects}/{quote(argv[1])}"))
        except urllib.error.HTTPError as e:
            if e.code == 404:
                sys.exit(ABSENT)
            raise
        size, sha = digest(read_chunks(http("GET", f"{objects}/{quote(argv[1])}?alt=media")))
        assert size == int(meta["size"]), (size, meta["size"])
        print(json.dumps({"size": size, "sha256": sha, "metadata": meta.get("metadata", {})}))
    elif command == "gcs-get":
        with open(argv[2], "wb") as out:
            for chunk in read_chunks(http("GET", f"{objects}/{quote(argv[1])}?alt=media")):
                out.write(chunk)
    elif command in ("gcs-put", "gcs-put-file"):
        if command == "gcs-put":
            body, metadata = b"not a snapshot", {"etcd-snapshot-uid": argv[2]}
        else:
            with open(argv[2], "rb") as f:
                body, metadata = f.read(), {}
        upload = f"{url}/upload/storage/v1/b/{quote(bucket)}/o?uploadType=media&name={quote(argv[1])}"
        http("POST", upload, body, {"Content-Type": "application/octet-stream"}).read()
        if metadata:
            http(
                "PATCH",
                f"{objects}/{quote(argv[1])}",
                json.dumps({"metadata": metadata}).encode(),
                {"Content-Type": "application/json"},
            ).read()
    elif command == "gcs-list":
        listing = json.load(http("GET", objects))
        for item in listing.get("items", []):
            print(item["name"])
    else:
        sys.exit(f"unknown command {command}")


def azure(command, connection, argv):
    from azure.core.exceptions import ResourceNotFoundError
    from azure.storage.blob import BlobServiceClient

    # No retries: the tests poll themselves, and an answer is wanted at once.
    service = BlobServiceClient.from_connection_string(connection, retry_total=0)
    container = service.get_container_client(argv[0])
    if command == "azure-setup":
        container.create_container()
    elif command == "azure-head":
        blob = container.get_blob_client(argv[1])
        try:
            properties = blob.get_blob_properties()
        except ResourceNotFoundError:
            sys.exit(ABSENT)
        size, sha = digest(blob.download_blob().chunks())
        assert size == properties.size, (size, properties.size)
        print(json.dumps({"size": size, "sha256": sha, "metadata": properties.metadata}))
    elif command == "azure-get":
        with open(argv[2], "wb") as out:
            container.get_blob_client(argv[1]).download_blob().readinto(out)
    elif command == "azure-put":
        container.get_blob_client(argv[1]).upload_blob(
            b"not a snapshot", metadata={"etcd_snapshot_uid": argv[2]}, overwrite=True
        )
    elif command == "azure-put-file":
        with open(argv[2], "rb") as f:
            container.get_blob_client(argv[1]).upload_blob(f, overwrite=True)
    elif command == "azure-list":
        for blob in container.list_blobs():
            print(blob.name)
    elif command == "azure-sas":
        import datetime

        from azure.storage.blob import ContainerSasPermissions, generate_container_sas

        print(
            generate_container_sas(
                account_name=service.account_name,
                container_name=argv[0],
                account_key=service.credential.account_key,
                permission=ContainerSasPermissions(
                    read=True, write=True, create=True, delete=True, list=True
                ),
                expiry=datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1),
            )
        )
    else:
        sys.exit(f"unknown command {command}")


def main(argv):
    command, target = argv[1], argv[2]
    if command.startswith("gcs-"):
        gcs(command, target.rstrip("/"), argv[3:])
    else:
        azure(command, target, argv[3:])


if __name__ == "__main__":
    main(sys.argv)
