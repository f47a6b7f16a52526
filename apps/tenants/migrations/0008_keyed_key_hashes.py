"""Keyed hashes and labels independent of the secret, for the keys and admin tokens already stored.

Their secrets are unknown here, and need not be: a stored hash was the SHA-256 of the secret, and
the new one is the HMAC of exactly that digest (`apps.tenants.keys.key_hash_of_digest`), so each
row is converted from what it holds and every existing secret keeps working. The old label (the
secret's first characters) is replaced by part of the new keyed hash. There is no way back: the
plain digest cannot be recovered from its HMAC."""

from __future__ import annotations

from typing import Any

from django.db import migrations, models

from apps.tenants.keys import key_hash_of_digest, key_label_of_hash


def _rehash(apps: Any, schema_editor: Any) -> None:
    for model_name in ("ApiKey", "AdminToken"):
        model = apps.get_model("tenants", model_name)
        rows = list(model.objects.using(schema_editor.connection.alias).only("pk", "secret_hash"))
        for row in rows:
            row.secret_hash = key_hash_of_digest(bytes.fromhex(row.secret_hash))
            row.prefix = key_label_of_hash(row.secret_hash)
        model.objects.using(schema_editor.connection.alias).bulk_update(rows, ["secret_hash", "prefix"], batch_size=500)


class Migration(migrations.Migration):

    dependencies = [
        ("tenants", "0007_tenant_allow_private_networks"),
    ]

    operations = [
        migrations.AlterField(
            model_name="apikey",
            name="prefix",
            field=models.CharField(
                help_text="A label for recognising the key, never part of its secret: a generated key's public id "
                "(mgw_<id>), else part of its keyed hash (#<hex>).",
                max_length=16,
            ),
        ),
        migrations.RunPython(_rehash, elidable=False),
    ]
