#!/usr/bin/env python3
"""Writes the CSV files torch.distributed.pipelining itself dumps for a few
multi-stage schedules, both formats ("compute_only" and "compute_comms").

The tests/interop/torch_*.csv files were produced by this script on a
machine with PyTorch installed (see torch_VERSION.txt); the tests never run
it. No process group is needed: the schedule classes compute every rank's
order in their constructor from the stages' rank/size attributes, so small
stand-in stage objects are enough.

Usage: gen_torch_csv.py OUT_DIR
"""

import csv
import os
import sys
import traceback


def main(out_dir):
    try:
        import torch
        from torch.distributed.pipelining import schedules as S
    except Exception as exc:  # torch missing: nothing to generate
        print("torch not importable:", exc)
        return 0

    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "torch_VERSION.txt"), "w") as f:
        f.write(torch.__version__ + "\n")

    class Stage:
        """Stand-in for _PipelineStageBase: only what schedule constructors read."""

        def __init__(self, index, num_stages, group_size, group_rank):
            self.stage_index = index
            self.num_stages = num_stages
            self.group_size = group_size
            self.group_rank = group_rank
            self.is_first = index == 0
            self.is_last = index == num_stages - 1
            self.submod = torch.nn.Identity()
            self.stage_index_to_group_rank = {}

    def stages_for(p, v, style):
        n = p * v
        if style == "loop":
            idx = [c * p for c in range(v)]
        else:  # v: rank 0 holds stages 0 and n-1
            idx = [0, n - 1]
        return [Stage(i, n, p, 0) for i in idx]

    cases = [
        ("ScheduleInterleaved1F1B", "interleaved-1f1b", 2, 4, 2, "loop"),
        ("ScheduleInterleaved1F1B", "interleaved-1f1b", 4, 8, 2, "loop"),
        ("ScheduleLoopedBFS", "looped-bfs", 2, 4, 2, "loop"),
        ("ScheduleInterleavedZeroBubble", "interleaved-zb", 2, 4, 2, "loop"),
        ("ScheduleInterleavedZeroBubble", "interleaved-zb", 4, 8, 2, "loop"),
        ("ScheduleZBVZeroBubble", "zbv", 2, 4, 2, "v"),
        ("ScheduleZBVZeroBubble", "zbv", 4, 8, 2, "v"),
        ("ScheduleDualPipeV", "dualpipev", 2, 4, 2, "v"),
        ("ScheduleDualPipeV", "dualpipev", 4, 8, 2, "v"),
    ]
    for cls_name, short, p, m, v, style in cases:
        base = os.path.join(out_dir, "torch_%s_p%d_m%d_v%d" % (short, p, m, v))
        try:
            cls = getattr(S, cls_name)
            sched = cls(stages_for(p, v, style), m)
            # Both of torch's writers, exactly as a user would call them.
            sched._dump_csv(base + ".compute_only.csv", format="compute_only")
            sched._dump_csv(base + ".compute_comms.csv", format="compute_comms")
            print("wrote", base)
        except Exception:
            print("FAILED", cls_name, p, m, v)
            traceback.print_exc()

    # Single-stage schedules keep their order in _get_pipeline_order().
    for cls_name, short, p, m in [("Schedule1F1B", "1f1b", 4, 8), ("ScheduleGPipe", "gpipe", 4, 8)]:
        base = os.path.join(out_dir, "torch_%s_p%d_m%d_v1" % (short, p, m))
        try:
            cls = getattr(S, cls_name)
            sched = cls(Stage(0, p, p, 0), m)
            order = sched._get_pipeline_order()
            if order is None:
                continue
            with open(base + ".compute_only.csv", "w", newline="") as f:
                w = csv.writer(f)
                for rank in order:
                    w.writerow(order[rank])
            print("wrote", base)
        except Exception:
            print("FAILED", cls_name, p, m)
            traceback.print_exc()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
