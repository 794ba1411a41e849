/*
 * team.c - Team, the result of the team functions (ncclTeam_t by value):
 * a named tuple (n_ranks, rank, stride) that the functions taking a team
 * accept back.
 *
 * A stand-in: once the struct table declares ncclTeam_t, Team becomes a
 * struct class of nccl.bindings like the others (with .ptr and from_data)
 * and this file goes away.
 */
#include "bindings.h"

static PyStructSequence_Field team_fields[] = {
    {"n_ranks", "number of ranks in the team"},
    {"rank", "this rank's index in the team"},
    {"stride", "world-rank distance between consecutive members"},
    {NULL, NULL},
};

static PyStructSequence_Desc team_desc = {
    "nccl.bindings.nccl.Team",
    "Team(iterable)\n--\n\n"
    "A team of ranks (ncclTeam_t): n_ranks members, this rank is member rank,\n"
    "member i is world rank (world rank of member 0) + i * stride.",
    team_fields,
    3,
};

int
n4p_init_team(PyObject *mod, n4p_state *st)
{
    st->team_type = PyStructSequence_NewType(&team_desc);
    if (st->team_type == NULL)
        return -1;
    return PyModule_AddObjectRef(mod, "Team", (PyObject *)st->team_type);
}

PyObject *
n4p_team_new(PyObject *mod, ncclTeam_t t)
{
    PyObject *o = PyStructSequence_New(n4p_get_state(mod)->team_type);
    if (o == NULL)
        return NULL;
    int v[3] = {t.nRanks, t.rank, t.stride};
    for (Py_ssize_t i = 0; i < 3; i++) {
        PyObject *x = PyLong_FromLong(v[i]);
        if (x == NULL) {
            Py_DECREF(o);
            return NULL;
        }
        PyStructSequence_SET_ITEM(o, i, x);
    }
    return o;
}
