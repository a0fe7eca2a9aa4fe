"""Mufti's graph matrices (1983, Sec. 2): exact figures from Fig. 3a, and properties."""

import numpy as np
import pytest

import mbjax

# Fig. 3a: h1: 1->2, h2: 1->3, h3: 2->4, h4: 2->5, h5: 2->6 (0-based parents below)
FIG_3A_PARENTS = [-1, 0, 0, 1, 1, 1]

C_A = np.array(
    [
        [1, 1, 0, 0, 0],
        [-1, 0, 1, 1, 1],
        [0, -1, 0, 0, 0],
        [0, 0, -1, 0, 0],
        [0, 0, 0, -1, 0],
        [0, 0, 0, 0, -1],
    ]
)

T_A = np.array(
    [
        [-1, -1, -1, -1, -1, -1],
        [0, -1, 0, -1, -1, -1],
        [0, 0, -1, 0, 0, 0],
        [0, 0, 0, -1, 0, 0],
        [0, 0, 0, 0, -1, 0],
        [0, 0, 0, 0, 0, -1],
    ]
)


def test_fig_3a_incidence_matrix():
    np.testing.assert_array_equal(mbjax.incidence_matrix(FIG_3A_PARENTS), C_A)


def test_fig_3a_path_matrix():
    T = mbjax.path_matrix(FIG_3A_PARENTS)
    np.testing.assert_array_equal(T, T_A)
    S = np.hstack([-np.eye(6, 1), C_A])  # S = (-e1, C), Eq. (22)
    np.testing.assert_array_equal(T @ S, np.eye(6, dtype=int))
    np.testing.assert_array_equal(T[1:] @ C_A, np.eye(5, dtype=int))  # T2 C = E
    np.testing.assert_array_equal(T[0], -np.ones(6, dtype=int))  # T1 = -1^T


def test_fig_3b_arbitrary_labeling_is_relabelled_regularly():
    # Fig. 3b's tree: arcs h1: 1->5, h2: 1->4, h3: 4->6, h4: 4->2, h5: 4->3 (1-based)
    parents = [-1, 3, 3, 0, 0, 3]
    order, new_parents = mbjax.regular_labeling(parents)
    assert order[0] == 0  # the root keeps label 1
    assert all(0 <= p < i for i, p in enumerate(new_parents[1:], 1))
    # peripheral vertices (no outgoing arc) get the highest labels
    children = {p for p in new_parents if p >= 0}
    leaves = [i for i in range(6) if i not in children]
    assert sorted(leaves) == list(range(6 - len(leaves), 6))
    C = mbjax.incidence_matrix(new_parents)
    assert np.array_equal(np.triu(C[1:]), C[1:]) and np.all(np.diag(C[1:]) == -1)


@pytest.mark.parametrize("seed", range(20))
def test_random_trees(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 40))
    parents = [-1] + [int(rng.integers(0, i)) for i in range(1, n)]
    C, T = mbjax.incidence_matrix(parents), mbjax.path_matrix(parents)
    S = np.hstack([-np.eye(n, 1), C])
    np.testing.assert_array_equal(T @ S, np.eye(n, dtype=int))
    # a random relabelling is turned back into a regular one with the same tree
    perm = np.concatenate([[0], 1 + rng.permutation(n - 1)])
    inv = np.argsort(perm)
    shuffled = [-1 if parents[perm[k]] < 0 else int(inv[parents[perm[k]]]) for k in range(n)]
    order, regular = mbjax.regular_labeling(shuffled)
    assert all(0 <= p < i for i, p in enumerate(regular[1:], 1))
    assert sorted(np.bincount([p for p in regular if p >= 0], minlength=n)) == sorted(
        np.bincount([p for p in parents if p >= 0], minlength=n)
    )


def test_model_ancestor_matrix_is_mufti_path_matrix():
    """The ancestor matrix the algorithms use is -T_2^T of the tree rooted at the world."""
    model = mbjax.load_example_robot("talos_reduced")
    parents = [-1] + [p + 1 for p in model.parents]  # the world is vertex 0
    T = mbjax.path_matrix(parents)
    np.testing.assert_array_equal(model.topology.ancestors, -T[1:, 1:].T)


def test_bad_trees():
    with pytest.raises(ValueError, match="cycle"):
        mbjax.regular_labeling([1, 2, 0, -1])
    with pytest.raises(ValueError, match="one root"):
        mbjax.regular_labeling([-1, -1])
    with pytest.raises(ValueError, match="regularly labelled"):
        mbjax.incidence_matrix([-1, 2, 0])


@pytest.mark.parametrize("order", [None, "pinocchio"])
@pytest.mark.parametrize("name", ["panda", "talos_reduced"])
def test_sweep_segments_visit_every_body_once_below_its_parent(name, order):
    """The segments of the level sweep hold every non-root body once, each level's parents in
    the level before it (through the entry table at a segment's first level), padding slots
    under their own slot; their padded slots are fewer than those of one sweep padded to the
    widest level, and every body of these robots keeps its parent's slot within a segment (no
    parent products in the scans)."""
    topo = mbjax.load_example_robot(name, **({"joint_order": order} if order else {})).topology
    sw = topo.sweep
    seen = []
    for s, seg in enumerate(sw.segments):
        above_width = len(sw.root.bodies) if s == 0 else sw.segments[s - 1].body.shape[1]
        assert seg.entry.shape == (seg.body.shape[1], above_width)
        for d in range(len(seg.body)):
            P = seg.entry if d == 0 else seg.parent[d]
            for k, b in enumerate(seg.body[d]):
                if b == topo.nbodies:  # padding: under its own slot, or (entry) under nothing
                    assert (not P[k].any()) if d == 0 else (P[k, k] == 1 and P[k].sum() == 1)
                    continue
                above = sw.root.bodies if (s, d) == (0, 0) else (
                    sw.segments[s - 1].body[-1] if d == 0 else seg.body[d - 1])
                assert above[int(np.argmax(P[k]))] == topo.parents[b] and P[k].sum() == 1
                seen.append(int(b))
            if d > 0:
                np.testing.assert_array_equal(seg.parent[0], np.eye(seg.body.shape[1]))
        assert seg.chains
    assert sorted(seen + list(sw.root.bodies)) == list(range(topo.nbodies))
    slots = sum(seg.body.size for seg in sw.segments)
    unsplit = (len(topo.levels) - 1) * max(len(lv.bodies) for lv in topo.levels[1:])  # one run, padded to the widest
    assert len(sw.segments) == {"panda": 2, "talos_reduced": 3}[name] and slots < unsplit
    flat = np.concatenate([sw.root.dofs.ravel()] + [seg.dofs.ravel() for seg in sw.segments])
    np.testing.assert_array_equal(flat[sw.dof_order], np.arange(topo.nv))
