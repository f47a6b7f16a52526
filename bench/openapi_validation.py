"""Time ``validate_arguments`` / ``check_structured`` against plain jsonschema.

Usage: ``python bench/openapi_validation.py [CALLS]`` (default 5,000). Cases:

* the synthetic 100-argument tool of ``bench/openapi_request.py`` (its integer values for ``string``
  parameters are turned into strings, so the arguments are valid);
* EC2 ``DescribeInstances`` (``../shared/data/catalog/openapi/aws/ec2.json``, skipped when absent) with
  two ``Filters`` and ``MaxResults``, and a 3-instance ``structuredContent`` checked against its output
  schema.

For each case prints the median and p99 of one call in µs, next to ``Draft202012Validator.is_valid`` on the
same schema (the cost without the compiled fast path), then the one-off cost of compiling the validators.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jsonschema import Draft202012Validator  # noqa: E402

from apps.catalog.openapi import ArgumentError, check_structured, compile_spec, validate_arguments  # noqa: E402
from apps.catalog.openapi.validation import ArgumentsValidator, OutputValidator  # noqa: E402
from bench.openapi_request import synthetic_spec  # noqa: E402

EC2 = Path(__file__).resolve().parent.parent.parent / "shared/data/catalog/openapi/aws/ec2.json"


def timed(fn: Callable[[], object], calls: int) -> tuple[float, float]:
    for _ in range(min(200, calls)):
        fn()
    clock = time.perf_counter_ns
    samples: list[int] = []
    for _ in range(calls):
        t0 = clock()
        fn()
        samples.append(clock() - t0)
    samples.sort()
    return statistics.median(samples) / 1000, samples[min(len(samples) - 1, int(len(samples) * 0.99))] / 1000


def line(label: str, fn: Callable[[], object], calls: int) -> None:
    median, p99 = timed(fn, calls)
    print(f"  {label:<44} median {median:8.1f} µs   p99 {p99:8.1f} µs")


def instance(i: int) -> dict:
    return {"InstanceId": f"i-{i:017x}", "InstanceType": "t3.micro", "ImageId": "ami-0abcdef1234567890",
            "State": {"Code": 16, "Name": "running"}, "PrivateIpAddress": f"10.0.0.{i}",
            "Tags": [{"Key": "Name", "Value": f"web-{i}"}, {"Key": "env", "Value": "prod"}],
            "SecurityGroups": [{"GroupId": "sg-1", "GroupName": "default"}], "EbsOptimized": False}


def main(argv: list[str]) -> int:
    calls = int(argv[0]) if argv else 5_000
    data, raw_args = synthetic_spec()
    tool = compile_spec(data).tools[0]
    args = {k: str(v) if isinstance(v, int) else v for k, v in raw_args.items()}
    validate_arguments(tool, args)
    plain = Draft202012Validator(tool.input_schema)
    assert plain.is_valid(args)
    print(f"synthetic 100-argument tool ({calls:,} calls)")
    line("validate_arguments (valid)", lambda: validate_arguments(tool, args), calls)
    line("jsonschema is_valid (valid)", lambda: plain.is_valid(args), max(calls // 10, 100))

    def rejected() -> None:
        try:
            validate_arguments(tool, raw_args)  # 16 integers for string parameters
        except ArgumentError:
            pass
    line("validate_arguments (16 problems, message)", rejected, max(calls // 10, 100))
    line("compile the argument validator (uncached)", lambda: ArgumentsValidator.make(tool), 200)

    if not EC2.exists():
        print(f"(skipping EC2: {EC2} not found)")
        return 0
    result = compile_spec(EC2.read_bytes())
    ec2 = {t.name: t for t in result.tools}
    describe = ec2["DescribeInstances"]
    ec2_args = {"Filters": [{"Name": "instance-state-name", "Values": ["running"]},
                            {"Name": "tag:env", "Values": ["prod", "staging"]}], "MaxResults": 50}
    validate_arguments(describe, ec2_args)
    plain = Draft202012Validator(describe.input_schema)
    print(f"EC2 DescribeInstances ({calls:,} calls)")
    line("validate_arguments", lambda: validate_arguments(describe, ec2_args), calls)
    line("jsonschema is_valid", lambda: plain.is_valid(ec2_args), calls)
    output = {"Reservations": [{"ReservationId": "r-1", "OwnerId": "1234", "Instances": [instance(i) for i in range(3)]}]}
    assert check_structured(describe, output) is None
    plain_out = Draft202012Validator(describe.output_schema)
    assert plain_out.is_valid(output)
    line("check_structured (3 instances)", lambda: check_structured(describe, output), calls)
    line("jsonschema is_valid (3 instances)", lambda: plain_out.is_valid(output), max(calls // 10, 100))
    t0 = time.perf_counter()
    for t in result.tools:
        ArgumentsValidator.make(t)
        OutputValidator.make(t)
    elapsed = time.perf_counter() - t0
    print(f"compiling argument + output validators of all {len(result.tools)} EC2 tools: {elapsed * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
