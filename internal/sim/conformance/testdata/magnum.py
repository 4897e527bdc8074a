"""Drive the cluster-API simulator with python-magnumclient, unchanged.

Usage: python3 magnum.py MODE CONFIG_JSON

MODE is how the client reaches the API:
  token    an X-Auth-Token and an explicit endpoint (magnum_url)
  session  a keystoneauth token session whose endpoint is the versioned URL
  catalog  a keystoneauth v2 password session: the client logs in at the
           identity simulator and finds container-infra in the catalog

CONFIG_JSON carries nks_url, identity_url, token, username, password,
tenant_id, region and the create values (cluster, labels...).
The script prints one JSON object with what it saw; any failure raises.
"""
import json
import sys

from keystoneauth1 import session as ksa_session
from keystoneauth1 import token_endpoint
from keystoneauth1.identity import v2
from magnumclient.v1 import client


# The library sends no OpenStack-API-Version header unless told (the magnum
# CLI passes "latest"); like the real service, the simulator refuses
# node-group calls without one (406).
API_VERSION = "latest"


def connect(mode, cfg):
    if mode == "token":
        return client.Client(auth_token=cfg["token"], magnum_url=cfg["nks_url"],
                             api_version=API_VERSION)
    if mode == "session":
        auth = token_endpoint.Token(endpoint=cfg["nks_url"] + "/v1", token=cfg["token"])
        return client.Client(session=ksa_session.Session(auth=auth), api_version=API_VERSION)
    if mode == "catalog":
        auth = v2.Password(auth_url=cfg["identity_url"] + "/v2.0",
                           username=cfg["username"], password=cfg["password"],
                           tenant_id=cfg["tenant_id"])
        return client.Client(session=ksa_session.Session(auth=auth),
                             region_name=cfg["region"], api_version=API_VERSION)
    raise SystemExit("unknown mode %r" % mode)


def main():
    mode, cfg = sys.argv[1], json.loads(sys.argv[2])
    mc = connect(mode, cfg)
    name = cfg["cluster"]
    out = {"mode": mode}

    created = mc.clusters.create(
        name=name, cluster_template_id="iaas_console", keypair="ops-key",
        flavor_id=cfg["flavor_id"], node_count=2, fixed_network=cfg["fixed_network"],
        fixed_subnet=cfg["fixed_subnet"], create_timeout=60, labels=cfg["labels"])
    out["cluster_uuid"] = created.uuid
    out["clusters"] = sorted(c.name for c in mc.clusters.list())
    cluster = mc.clusters.get(name)
    out["cluster_status"] = cluster.status

    group = mc.nodegroups.create(
        cluster.uuid, name="batch", flavor_id=cfg["flavor_id"], image_id=cfg["image_id"],
        node_count=1, labels={"availability_zone": "kr-pub-b", "boot_volume_type": "General SSD",
                              "boot_volume_size": "50", "ca_enable": "False"})
    out["nodegroup_created"] = group.name
    out["nodegroups"] = sorted(g.name for g in mc.nodegroups.list(cluster.uuid))
    out["nodegroup_status"] = mc.nodegroups.get(cluster.uuid, "batch").status

    mc.nodegroups.delete(cluster.uuid, "batch")
    remaining = sorted(g.name for g in mc.nodegroups.list(cluster.uuid))
    out["nodegroups_after_delete"] = remaining
    mc.clusters.delete(cluster.uuid)
    out["clusters_after_delete"] = sorted(c.name for c in mc.clusters.list())
    print(json.dumps(out))


if __name__ == "__main__":
    main()
