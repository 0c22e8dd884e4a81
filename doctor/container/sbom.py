"""The image's CycloneDX SBOM: the venv's distributions, listed by a container of the new image."""

from __future__ import annotations

import json
import warnings
from datetime import datetime

from doctor.container.inputs import LABEL, VENV
from doctor.errors import UsageError
from doctor.names import canonical_name


LIST_DISTS = (
    "import importlib.metadata as m, json, sys; "
    "print(json.dumps(sorted(({'name': d.metadata['Name'], 'version': d.version, "
    "'license': d.metadata.get('License-Expression') or d.metadata.get('License') or '', "
    "'summary': d.metadata.get('Summary') or ''} for d in m.distributions()), "
    "key=lambda x: x['name'].lower())))"
)


def list_venv(client, image_id: str) -> list[dict]:
    out = client.containers.run(image_id, [f"{VENV}/bin/python", "-c", LIST_DISTS], remove=True,
                                network_mode="none", stdout=True, stderr=False)
    return json.loads(out)


def sbom_json(dists: list[dict], tag: str, image_id: str, labels: dict, created: datetime) -> str:
    """A CycloneDX 1.6 JSON document of the venv's distributions (cyclonedx-python-lib)."""
    import uuid

    try:
        from cyclonedx.model import Property
        from cyclonedx.model.bom import Bom
        from cyclonedx.model.component import Component, ComponentType
        from cyclonedx.output.json import JsonV1Dot6
        from packageurl import PackageURL
    except ImportError:
        raise UsageError("the SBOM needs cyclonedx-python-lib: pip install 'verl-doctor[container]'")

    bom = Bom(serial_number=uuid.uuid5(uuid.NAMESPACE_URL, f"verl-doctor:{image_id}"))
    bom.metadata.timestamp = created
    name, _, version = tag.rpartition(":") if ":" in tag.rsplit("/", 1)[-1] else (tag, "", "latest")
    bom.metadata.component = Component(
        name=name, version=version, type=ComponentType.CONTAINER, bom_ref=image_id,
        properties=[Property(name=f"{LABEL}.{k.split('.', 2)[-1]}" if k.startswith(LABEL) else k, value=v)
                    for k, v in sorted(labels.items())] + [Property(name=f"{LABEL}.image.id", value=image_id),
                                                           Property(name=f"{LABEL}.venv", value=VENV)])
    for d in dists:
        n = canonical_name(d["name"])
        purl = PackageURL(type="pypi", name=n, version=d["version"])
        bom.components.add(Component(name=d["name"], version=d["version"], type=ComponentType.LIBRARY,
                                     purl=purl, bom_ref=str(purl), description=d["summary"] or None))
    with warnings.catch_warnings():  # the venv's dependency graph is not recorded: cyclonedx warns that it is not
        warnings.simplefilter("ignore", UserWarning)
        return JsonV1Dot6(bom).output_as_string(indent=2)
