"""plan(), Plan and Action against `pipeplan plan` and `pipeplan list`."""

import copy
import pickle

import pytest

import pipeplan

SHAPES = [
    ("gpipe", 4, 8, None),
    ("1f1b", 4, 8, None),
    ("interleaved-1f1b", 4, 8, 2),
    ("looped-bfs", 2, 4, 2),
    ("interleaved-zb", 4, 8, 2),
    ("zbv", 4, 8, None),
    ("dualpipev", 4, 8, None),
    ("v-half", 4, 8, None),
    ("v-min", 4, 8, None),
    ("zb-h1", 4, 8, None),
    ("vpp", 4, 8, 2),
]


def cli_shape(schedule, pp, m, v):
    args = ["-s", schedule, "-p", pp, "-m", m]
    return args + (["-v", v] if v else [])


@pytest.mark.parametrize("schedule,pp,m,v", SHAPES)
def test_plan_matches_the_cli_in_every_format(cli, schedule, pp, m, v):
    plan = pipeplan.plan(schedule, pp, m, stages_per_rank=v)
    assert plan.to_json() == cli.out("plan", *cli_shape(schedule, pp, m, v), "-f", "json")
    assert plan.to_csv() == cli.out("plan", *cli_shape(schedule, pp, m, v), "-f", "csv")
    assert plan.to_text() == cli.out("plan", *cli_shape(schedule, pp, m, v), "-f", "text")
    compute = pipeplan.plan(schedule, pp, m, stages_per_rank=v, compute_only=True)
    assert compute.compute_only and not plan.compute_only
    assert compute.to_json() == cli.out("plan", *cli_shape(schedule, pp, m, v), "--compute-only")


def test_dualpipe_routes_match_the_cli_and_survive_json(cli):
    # Bidirectional DualPipe (DeepSeek): half the microbatches cross stages
    # 0..3, half 4..7; only JSON carries the routes.
    plan = pipeplan.plan("dualpipe", 4, 8)
    text = plan.to_json()
    assert text == cli.out("plan", "-s", "dualpipe", "-p", 4, "-m", 8, "-f", "json")
    assert '"routes": ["0-3", "0-3", "0-3", "0-3", "4-7", "4-7", "4-7", "4-7"]' in text
    assert plan.to_text() == cli.out("plan", "-s", "dualpipe", "-p", 4, "-m", 8, "-f", "text")
    assert pickle.loads(pickle.dumps(plan)).to_json() == text
    with pytest.raises(pipeplan.InputError, match="CSV cannot carry microbatch routes"):
        plan.to_csv()


def test_plan_rank_is_the_clis_rank(cli):
    for compute_only in (False, True):
        one = pipeplan.plan("1f1b", 4, 8, rank=2, compute_only=compute_only)
        flags = ["--compute-only"] if compute_only else []
        assert one.to_json() == cli.out("plan", "-s", "1f1b", "-p", 4, "-m", 8, "-r", 2, *flags)
        assert one.rank_ids == [2] and not one.is_whole
        assert [str(a) for a in one.ranks[0]] == [
            str(a) for a in pipeplan.plan("1f1b", 4, 8, compute_only=compute_only).ranks[2]]


def test_ranks_are_torch_grammar_actions():
    plan = pipeplan.plan("1f1b", 4, 8)
    ranks = plan.ranks
    assert len(ranks) == 4 and plan.rank_ids == [0, 1, 2, 3]
    assert [str(a) for a in ranks[0][:4]] == ["0F0", "0SEND_F0", "0F1", "0SEND_F1"]
    assert " ".join(map(str, ranks[1])) == plan.to_text().splitlines()[1].split(": ", 1)[1]
    a = ranks[1][0]
    assert (a.type, a.stage, a.microbatch, a.sub_stage, a.sub_microbatch) == ("RECV_F", 1, 0, None, None)
    assert a.is_comm and not a.is_compute
    assert plan.rank(3) == ranks[3]
    with pytest.raises(IndexError):
        plan.rank(4)


def test_action_parses_compares_and_hashes():
    a = pipeplan.Action("(0F7;7B3)OVERLAP_F_B")
    assert (a.type, a.stage, a.microbatch, a.sub_stage, a.sub_microbatch) == ("OVERLAP_F_B", 0, 7, 7, 3)
    assert str(a) == "(0F7;7B3)OVERLAP_F_B" and repr(a) == "Action('(0F7;7B3)OVERLAP_F_B')"
    assert pipeplan.Action("1SEND_F3") == "1SEND_F3" == pipeplan.Action("1SEND_F3")
    assert pipeplan.Action("0F0") != pipeplan.Action("0F1")
    assert len({pipeplan.Action("0F0"), pipeplan.Action("0F0"), pipeplan.Action("0B0")}) == 2
    assert pipeplan.Action("0REDUCE_GRAD").microbatch is None
    assert pickle.loads(pickle.dumps(a)) == a
    with pytest.raises(pipeplan.InputError, match="unknown action '2BW0'"):
        pipeplan.Action("2BW0")


def test_meta_answers_attributes_and_json_keys():
    meta = pipeplan.plan("zbv", 4, 8).meta
    assert (meta.schedule, meta.pp_degree, meta.num_microbatches, meta.stages_per_rank) == ("zbv", 4, 8, 2)
    assert meta["stage_to_rank"] == meta.stage_to_rank == "v" and meta.num_stages == 8
    assert meta.to_dict() == {"schedule": "zbv", "pp_degree": 4, "num_microbatches": 8,
                              "stages_per_rank": 2, "num_stages": 8, "stage_to_rank": "v",
                              "forward_only": False}
    assert meta.rank_of(7) == 0 and meta.stages_of(1) == [1, 6]
    with pytest.raises(KeyError):
        meta["nope"]


def test_plan_len_repr_equality_copy_and_pickle():
    plan = pipeplan.plan("1f1b", 4, 8)
    assert len(plan) == plan.num_actions == 160
    assert repr(plan) == "<pipeplan.Plan 1f1b pp=4 m=8 v=1, 160 actions, with comms>"
    assert "rank 2 only" in repr(pipeplan.plan("1f1b", 4, 8, rank=2))
    assert plan == pipeplan.plan("1F1B", 4, 8)  # aliases resolve to the canonical name
    assert plan != pipeplan.plan("1f1b", 4, 8, compute_only=True)
    assert copy.deepcopy(plan) == plan and copy.copy(plan) == plan
    assert pickle.loads(pickle.dumps(plan)) == plan
    one = pipeplan.plan("1f1b", 4, 8, rank=1)
    assert pickle.loads(pickle.dumps(one)) == one


def test_timeline_is_the_clis_show(cli, tmp_path):
    plan = pipeplan.plan("1f1b", 4, 8)
    path = tmp_path / "p.json"
    path.write_text(plan.to_json())
    assert plan.timeline() == cli.out("show", path)


def test_schedules_are_the_clis_list(cli):
    names = [s.name for s in pipeplan.schedules()]
    listed = cli.out("list")
    assert names and all(name in listed for name in names)
    assert len(names) == len(set(names))
    one = {s.name: s for s in pipeplan.schedules()}["1f1b"]
    assert "Schedule1F1B" in one.aliases and one.stage_to_rank == "loop"
    assert one.default_stages_per_rank == 1 and one.constraints
    for s in pipeplan.schedules():  # every row plans a shape it documents as allowed
        v = s.default_stages_per_rank
        plan = pipeplan.plan(s.name, 4, 16, stages_per_rank=v)
        assert plan.meta.schedule == s.name and pipeplan.verify(plan) == []


@pytest.mark.parametrize("schedule,v", [("1f1b", None), ("interleaved-1f1b", 2), ("zbv", None)])
def test_forward_only_plans_are_the_clis(cli, tmp_path, schedule, v):
    plan = pipeplan.plan(schedule, 4, 8, stages_per_rank=v, forward_only=True)
    args = ["-s", schedule, "-p", 4, "-m", 8] + (["-v", v] if v else [])
    assert plan.to_json() == cli.out("plan", *args, "--forward-only")
    assert plan.meta.forward_only and plan.meta["forward_only"] and "forward-only" in repr(plan)
    assert {a.type for r in plan.ranks for a in r} <= {"F", "SEND_F", "RECV_F"}
    assert pipeplan.verify(plan) == []
    csv = plan.to_csv()
    assert pipeplan.verify(pipeplan.loads(csv, forward_only=True)) == []
    assert pipeplan.verify(pipeplan.loads(csv))  # owed backwards are missing
    path = tmp_path / "f.csv"
    path.write_text(csv)
    assert cli.run("verify", path, "--forward-only").returncode == 0
    order = {r: [str(a) for a in actions] for r, actions in enumerate(plan.ranks)}
    assert pipeplan.verify(pipeplan.from_torch(order, forward_only=True)) == []
    assert not pipeplan.plan(schedule, 4, 8, stages_per_rank=v).meta.forward_only


def test_version_matches_the_cli(cli):
    assert pipeplan.__version__ and pipeplan.__version__ in cli.out("--version")


def test_help_is_useful():
    doc = pipeplan.plan.__doc__
    for word in ("schedule", "pp_degree", "num_microbatches", "stages_per_rank", "rank",
                 "compute_only", "ShapeError"):
        assert word in doc
    assert pipeplan.Plan.__module__ == "pipeplan"
    for name in pipeplan.__all__:
        assert getattr(pipeplan, name).__doc__, name


def test_the_stubs_match_the_module():
    import ast
    import pathlib
    stub = pathlib.Path(pipeplan.__file__).with_name("__init__.pyi")
    tree = ast.parse(stub.read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            cls = getattr(pipeplan, node.name)
            stubbed = {i.name for i in node.body if isinstance(i, ast.FunctionDef)}
            assert all(hasattr(cls, name) for name in stubbed), node.name
            public = {n for n in dir(cls) if not n.startswith("_")}
            assert public <= stubbed, (node.name, public - stubbed)
        elif isinstance(node, ast.FunctionDef):
            assert hasattr(pipeplan, node.name), node.name
    stubbed_names = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    public = {n for n in pipeplan.__all__ if not n.startswith("_") and n != "errors"}
    errors = {"Error", "InputError", "InputTypeError", "ShapeError", "BudgetError", "PlanError",
              "InternalError"}
    assert public - errors <= stubbed_names


def test_batch_p2p_groups_read_write_and_pickle():
    text = ("0F0,0SEND_F0,0F1,(0SEND_F1;0RECV_B0)BATCH_P2P,0B0,0RECV_B1,0B1\n"
            "1RECV_F0,1F0,1B0,(1SEND_B0;1RECV_F1)BATCH_P2P,1F1,1B1,1SEND_B1\n")
    plan = pipeplan.loads(text)
    assert plan.to_csv() == text
    members = plan.ranks[0][3:5]
    assert [str(a) for a in members] == ["0SEND_F1", "0RECV_B0"]
    assert [a.batch_next for a in members] == [True, False]
    assert pickle.loads(pickle.dumps(members[0])) == members[0]
    assert pickle.loads(pickle.dumps(members[0])).batch_next
    assert pipeplan.loads(plan.to_json()) == plan
    assert "(1SEND_B0;1RECV_F1)BATCH_P2P" in plan.to_text()
    order = [[str(a) for a in r] for r in plan.ranks]
    order[0][3:5] = ["(0SEND_F1;0RECV_B0)BATCH_P2P"]
    order[1][3:5] = ["(1SEND_B0;1RECV_F1)BATCH_P2P"]
    assert pipeplan.from_torch(order) == plan
    with pytest.raises(pipeplan.InputError, match="torch's _load_csv cannot read"):
        pipeplan.to_torch_csv(plan)
    # A group of one is an explicit wait: one Action, marked waited.
    one = pipeplan.loads("0F0,(0SEND_F0)BATCH_P2P\n1RECV_F0,1F0\n", forward_only=True)
    waited = one.ranks[0][1]
    assert waited.waited and not waited.batch_next
    assert str(waited) == "(0SEND_F0)BATCH_P2P" == pipeplan.Action("(0SEND_F0)BATCH_P2P")
    assert waited != pipeplan.Action("0SEND_F0")
    assert pickle.loads(pickle.dumps(waited)).waited
    # It is a commit on the group's communicator: NCCL never meets it with rank 1's plain receive.
    assert [d.code for d in pipeplan.verify(one)] == ["group-meets-single"]
    assert pipeplan.verify(one, runtime="dualpipe") == []
    with pytest.raises(pipeplan.InputError, match="torch's _load_csv cannot read"):
        pipeplan.to_torch_csv(one)
    with pytest.raises(pipeplan.InputError, match="batched P2P group"):
        pipeplan.Action("(0SEND_F1;0RECV_B0)BATCH_P2P")
