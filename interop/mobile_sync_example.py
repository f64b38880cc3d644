#!/usr/bin/env python3
"""An offline-first sync client for Tollgate's mobile Storage API, in one file (needs `requests`).

A device keeps its records in a local JSON file and works without the network. When it is
online, `sync()` does two things:

1. **push**: every record edited (or deleted) offline is written with a conditional request,
   `PUT …/objects/{id}` with `If-Match: <the eTag the device last saw>` (or `If-None-Match: *`
   for a record the server has never seen). A `412 Precondition Failed` means another device
   changed the record in the meantime: fetch the server's version, merge, and retry with the
   server's eTag.
2. **pull**: `GET …/collections/{c}/changes?since=<cursor>` returns the puts and deletes after
   the stored cursor, in commit order, and a new cursor. The device fetches what changed and
   stores the new cursor. The first sync (or a `410 Gone`: the cursor is older than the feed's
   retention) takes the current cursor *first*, then reads a full listing, then follows the feed
   from that cursor: nothing committed in between can be missed.

Conflict rule: records are JSON documents of fields, and every field carries the time it was
last edited and the device that edited it (`clock`). Merging two versions keeps, field by field,
the value with the later `(edit time, device name)`: the last writer wins per field, and two
devices that edited different fields both keep their edits. A record deleted on one device and
edited on another survives with the edit (an edit beats a concurrent delete). Every device
applies the same rule to the same versions, so all of them and the server converge.

On the server a record is an object of the collection, `application/json`:
`{"fields": {...}, "clock": {"field": [edit_time, "device"]}}`.

Usage (the login token in TOLLGATE_LOGIN_TOKEN):

    python3 mobile_sync_example.py --base-url http://127.0.0.1:7080 --collection notes \\
        --store phone.json --device phone set note-1 title "Shopping list"
    python3 mobile_sync_example.py … sync
    python3 mobile_sync_example.py … show
"""
import argparse
import json
import os
import sys
import time
import urllib.parse
from pathlib import Path

import requests

API = "/mobile/platform/storage/collections"


def same_etag(a, b) -> bool:
    """ETags compare case-insensitively without their quotes (OSS upper-cases the same MD5)."""
    norm = lambda e: (e or "").strip().removeprefix("W/").strip('"').lower()
    return a is not None and b is not None and norm(a) == norm(b)


def merge(local: dict, remote: dict) -> dict:
    """Field by field, the later (edit time, device) wins. Both arguments and the result are
    documents {"fields": {...}, "clock": {...}}."""
    fields, clock = {}, {}
    for name in sorted(set(local["clock"]) | set(remote["clock"])):
        mine, theirs = local["clock"].get(name), remote["clock"].get(name)
        winner = local if theirs is None or (mine is not None and tuple(mine) >= tuple(theirs)) else remote
        fields[name] = winner["fields"].get(name)
        clock[name] = list(winner["clock"][name])
    return {"fields": fields, "clock": clock}


class SyncClient:
    """One device: a local JSON store, synced with one collection of the Storage API."""

    def __init__(self, base_url: str, collection: str, token, store_path, device: str,
                 timeout: float = 30, session: requests.Session | None = None):
        self.base = f"{base_url.rstrip('/')}{API}/{urllib.parse.quote(collection, safe='')}"
        self.token = token  # a string, or a function returning a fresh login token
        self.path = Path(store_path)
        self.device = device
        self.timeout = timeout
        self.http = session or requests.Session()
        self.state = json.loads(self.path.read_text()) if self.path.exists() else {"cursor": None, "records": {}}

    # MARK: the local store (works offline)

    def save(self):
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps(self.state, indent=1, sort_keys=True))
        os.replace(temporary, self.path)  # a crash leaves the old file or the new one

    @property
    def records(self) -> dict:
        return self.state["records"]

    def edit(self, record_id: str, field: str, value, at: float | None = None):
        """Sets one field offline; `at` is the edit time (default: this device's clock)."""
        entry = self.records.setdefault(record_id, {"doc": {"fields": {}, "clock": {}}, "eTag": None})
        entry["doc"]["fields"][field] = value
        entry["doc"]["clock"][field] = [time.time() if at is None else at, self.device]
        entry["dirty"], entry["deleted"] = True, False
        self.save()

    def delete(self, record_id: str):
        """Deletes a record offline (pushed as a conditional DELETE)."""
        entry = self.records.get(record_id)
        if entry:
            entry["dirty"], entry["deleted"] = True, True
            self.save()

    def view(self) -> dict:
        """What the app shows: id → fields, deleted records left out."""
        return {rid: e["doc"]["fields"] for rid, e in sorted(self.records.items()) if not e.get("deleted")}

    # MARK: HTTP

    def request(self, method: str, url: str, **kwargs) -> requests.Response:
        token = self.token() if callable(self.token) else self.token
        headers = {"Authorization": f"Bearer {token}", **kwargs.pop("headers", {})}
        return self.http.request(method, url, headers=headers, timeout=self.timeout, **kwargs)

    def object_url(self, record_id: str) -> str:
        return f"{self.base}/objects/{urllib.parse.quote(record_id, safe='')}"

    def fetch(self, record_id: str):
        """(document, eTag) of the server's version, or (None, None) when there is none."""
        response = self.request("GET", self.object_url(record_id), headers={"Accept": "application/json"})
        if response.status_code == 404:
            return None, None
        response.raise_for_status()
        return response.json(), response.headers["ETag"]

    def put(self, record_id: str, doc: dict, condition: dict) -> requests.Response:
        body = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
        return self.request("PUT", self.object_url(record_id), data=body,
                            headers={"Content-Type": "application/json", **condition})

    # MARK: push

    def push(self, max_attempts: int = 5):
        for record_id in sorted(self.records):
            entry = self.records[record_id]
            if entry.get("dirty"):
                self.push_one(record_id, entry, max_attempts)
                self.save()

    def push_one(self, record_id: str, entry: dict, max_attempts: int):
        if entry.get("deleted"):
            if not entry["eTag"]:  # never reached the server
                del self.records[record_id]
                return
            response = self.request("DELETE", self.object_url(record_id), headers={"If-Match": entry["eTag"]})
            if response.status_code in (204, 404):
                del self.records[record_id]
                return
            if response.status_code != 412:
                response.raise_for_status()
            # Changed elsewhere since we saw it: an edit beats a concurrent delete.
            doc, etag = self.fetch(record_id)
            if doc is None:
                del self.records[record_id]
            else:
                entry.update(doc=doc, eTag=etag, dirty=False, deleted=False)
            return
        for _ in range(max_attempts):
            condition = {"If-Match": entry["eTag"]} if entry["eTag"] else {"If-None-Match": "*"}
            response = self.put(record_id, entry["doc"], condition)
            if response.status_code in (200, 201):
                entry.update(eTag=response.headers["ETag"], dirty=False)
                return
            if response.status_code != 412:
                response.raise_for_status()
            # Someone else wrote (or deleted) it first: merge with the server's version and retry
            # from its eTag; when it is gone, our edit re-creates it.
            remote, etag = self.fetch(record_id)
            if remote is not None:
                entry["doc"] = merge(entry["doc"], remote)
            entry["eTag"] = etag
        raise RuntimeError(f"{record_id}: still conflicting after {max_attempts} attempts")

    # MARK: pull

    def pull(self, limit: int = 100):
        if self.state["cursor"] is None:
            return self.resync()
        while True:
            response = self.request("GET", f"{self.base}/changes", params={"since": self.state["cursor"], "limit": limit})
            if response.status_code == 410:  # older than the feed's retention
                return self.resync()
            response.raise_for_status()
            body = response.json()
            for item in body["items"]:
                self.apply(item)
            self.state["cursor"] = body["cursor"]
            self.save()
            if not body["hasMore"]:
                return

    def apply(self, change: dict):
        record_id, entry = change["id"], self.records.get(change["id"])
        if entry and entry.get("dirty"):
            return  # our next push meets the server's version (412) and merges
        if change["op"] == "delete":
            self.records.pop(record_id, None)
            return
        if entry and same_etag(entry["eTag"], change.get("eTag")):
            return  # our own write, or one we already fetched
        headers = {"If-None-Match": entry["eTag"]} if entry and entry["eTag"] else {}
        response = self.request("GET", self.object_url(record_id), headers=headers)
        if response.status_code == 304:
            return
        if response.status_code == 404:  # deleted since: its delete is further on in the feed
            self.records.pop(record_id, None)
            return
        response.raise_for_status()
        self.records[record_id] = {"doc": response.json(), "eTag": response.headers["ETag"], "dirty": False, "deleted": False}

    def resync(self):
        """Cursor first, then the listing: a change committed meanwhile is in the feed after it."""
        response = self.request("GET", f"{self.base}/changes")
        response.raise_for_status()
        cursor = response.json()["cursor"]
        seen, url, params = set(), f"{self.base}/objects", {"limit": 100}
        for _ in range(100_000):  # bounded: one page per round
            page = self.request("GET", url, params=params)
            page.raise_for_status()
            body = page.json()
            for item in body["items"]:
                seen.add(item["id"])
                entry = self.records.get(item["id"])
                if entry and (entry.get("dirty") or same_etag(entry["eTag"], item["eTag"])):
                    continue
                doc, etag = self.fetch(item["id"])
                if doc is not None:
                    self.records[item["id"]] = {"doc": doc, "eTag": etag, "dirty": False, "deleted": False}
            following = next((link["href"] for link in body.get("links", []) if link.get("rel") == "next"), None)
            if not body["hasMore"] or not following:
                break
            url, params = urllib.parse.urljoin(page.url, following), None
        for record_id in [r for r, e in self.records.items() if r not in seen and not e.get("dirty")]:
            del self.records[record_id]
        self.state["cursor"] = cursor
        self.save()

    def sync(self):
        self.push()
        self.pull()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", required=True, help="the token listener, e.g. http://127.0.0.1:7080")
    parser.add_argument("--collection", required=True)
    parser.add_argument("--store", required=True, help="the device's local JSON file")
    parser.add_argument("--device", required=True, help="this device's name (breaks ties between edits)")
    parser.add_argument("command", choices=["set", "delete", "sync", "show"])
    parser.add_argument("args", nargs="*")
    options = parser.parse_args(argv)
    client = SyncClient(options.base_url, options.collection, os.environ.get("TOLLGATE_LOGIN_TOKEN", ""),
                        options.store, options.device)
    if options.command == "set":
        record_id, field, value = options.args
        client.edit(record_id, field, value)
    elif options.command == "delete":
        client.delete(*options.args)
    elif options.command == "sync":
        client.sync()
    print(json.dumps(client.view(), indent=1, sort_keys=True))


if __name__ == "__main__":
    sys.exit(main())
