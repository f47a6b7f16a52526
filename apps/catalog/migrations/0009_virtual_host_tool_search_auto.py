from django.db import migrations, models


class Migration(migrations.Migration):
    # Only the default changes: hosts that exist keep the mode they have, new ones get `auto`.

    dependencies = [
        ('catalog', '0008_backend_max_concurrency'),
    ]

    operations = [
        migrations.AlterField(
            model_name='virtualhost',
            name='tool_search',
            field=models.CharField(choices=[('auto', 'Automatic (listed alone on a host with many tools, off on a small one)'), ('off', 'Off'), ('listed', 'Listed with the other tools'), ('only', 'Listed alone (the other tools stay callable by name)')], default='auto', help_text="The gateway's own tool that finds the tools for a task among this host's.", max_length=8),
        ),
    ]
