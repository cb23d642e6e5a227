/*
 * The conflict-checked cutover protocol (issue 26; SYSTEM rule 2 as
 * revised), model-checked exhaustively with Spin at a small scope.
 *
 * One collection. Actors, each step atomic, interleaved in every order:
 *   writer     appends put/delete records (one object each, named by its
 *              version, as append segments are), builds an upload on the
 *              head it sees and commits it later (its records ordered
 *              before the appends committed meanwhile), removes an object,
 *              or replaces one in place (same name, other content);
 *   owner      restores the head to the version it superseded (rule 3's
 *              re-add window), drops the name and re-creates it (a new
 *              lifetime: versions, sequence numbers and names start again),
 *              changes the CCS facts;
 *   compactor  plans at the head (every object it holds: drop_deletes, as
 *              the planner decides when nothing outside the job is older),
 *              writes the merged output and submits a request pinned to its
 *              base with its exact coverage (inputs with their content as
 *              checksum, the output, the lifetime, the facts);
 *   publisher  judges a request at its head CAS (the check and the CAS are
 *              one step: the stand-in re-judges after a lost CAS): on its
 *              base, apply; on a moved head, apply there only if the
 *              conflict check holds: incarnation (same lifetime, the base an
 *              ancestor of the head), input_gone, checksum_changed,
 *              delete_since_base (no non-cutover commit since the base added
 *              a record over an input key not ordered after every input
 *              record), facts (unchanged since the task was judged); a
 *              request past its deadline is refused;
 *   GC         deletes an object that neither the head nor the version it
 *              superseded (the retained one a restore may bring back)
 *              references, and no pending request's output before that
 *              request's deadline passed (rules 3 and 4).
 *
 * Safety properties (the simulation's invariants, after every step):
 *   P1 readable      every key reads at the head as the committed writes
 *                    say (latest value kept, no deleted record resurrected,
 *                    no appended record lost): the ghost is the set of
 *                    committed records, which no compaction touches;
 *   P2 no dangling   every object the head references exists;
 *   P3 lifetime      every object the head references was written in the
 *                    head's lifetime (invariant rebase-check / incarnation);
 *   P4 stale facts   no request applied under other CCS facts than it was
 *                    judged under (invariant stale-facts).
 *
 * Mutations (-D...): MUT_INC, MUT_INPUT, MUT_SUM, MUT_DEL, MUT_FACTS drop
 * one clause of the publisher's check as the stand-in's SkipClauses /
 * SkipFactsRecheck do; MUT_GC_RETAIN drops GC's retained-version gate.
 * NOCAP is a publisher without the capability (refuses every moved head).
 * Each mutation must produce a counterexample (model_test.go).
 */

#define NK     2   /* record keys */
#define NS     8   /* sequence numbers 0..7 per lifetime */
#define NNAMES 10  /* object names: 1..7 append/upload (by version), 8..9 outputs */
#define MAXG   10  /* commits in the log */
#define NONE   255
#ifndef MAXC
#define MAXC   1   /* compactions (a refused one is rebuilt while MAXC allows) */
#endif

/* A record value: key k, sequence s, delete flag d. A set of records (an
 * object's content, the ghost) is a bitmask of them. */
#define REC(k, s, d) (1 << ((k) * 16 + (s) * 2 + (d)))
#define KEYRECS(k)   (65535 << ((k) * 16)) /* every record of key k */

/* GC's gate for name gn */
#ifndef MUT_GC_RETAIN
#define RETAINED(gn) (cparent[hg] != NONE && (chead[cparent[hg]] & (1 << (gn))))
#else
#define RETAINED(gn) false
#endif
#define DELETABLE(gn) (live[gn] && !(chead[hg] & (1 << (gn))) && !(pending && !rexpired && (gn) == rout) && !RETAINED(gn))
#define gcable() (DELETABLE(1) || DELETABLE(2) || DELETABLE(3) || DELETABLE(4) || DELETABLE(5) || DELETABLE(6) || DELETABLE(7) || DELETABLE(8) || DELETABLE(9))

#define CANCOMMIT (cver[hg] + 1 < 8 && ng < MAXG && nseq < NS)

/* The bucket. */
int  content[NNAMES];
bool live[NNAMES];
byte life[NNAMES];

/* The commit log: the head is commit hg. */
byte clife[MAXG];
byte cver[MAXG];
byte cparent[MAXG];
short chead[MAXG];  /* object names the version references */
int  caddrec[MAXG]; /* records the commit added */
bool ccut[MAXG];    /* a cutover */
int  cexp[MAXG];    /* the ghost at that version */
byte ng = 1;
byte hg = 0;
byte hlife = 1;
byte nseq = 1;
int  ghost = 0;     /* committed records of the head's lineage */
byte facts = 0;

/* One compaction request in flight at a time. */
bool pending = false;
bool rexpired = false;
byte rbase;
byte rlife;
byte rfacts;
byte rout;
byte rmaxseq; /* the newest input record's sequence number */
short rin;
int  rchk[NNAMES];

/* Bounds on the actors' steps. */
byte appends = 0;
byte compactions = 0;
bool ubuilt = false;
/* ucut: a cutover landed since the upload was built. Its late commit is
 * then outside the model: the planner's drop_deletes proof assumes no
 * commit lands records ordered before a rewrite that landed since they
 * were built (the model finds the resurrection if it does; see
 * docs: what the model leaves out). */
bool ucut = false;
bool ucommitted = false;
int  urec;
bool wdone = false;
bool restored = false;
bool recreated = false;
bool fchanged = false;
bool stale_applied = false;

/* The read of key k from a set of records: 0 absent, else 1 + 2*seq + del
 * of the highest-sequence record. */
inline readk(recs, k, out) {
	out = 0;
	s = 0;
	do
	:: s < NS ->
		if
		:: recs & REC(k, s, 0) -> out = 1 + 2 * s
		:: recs & REC(k, s, 1) -> out = 2 + 2 * s
		:: else -> skip
		fi;
		s++
	:: else -> break
	od;
	if
	:: out > 0 && (out - 1) % 2 == 1 -> out = 0 /* a delete marker wins: absent */
	:: else -> skip
	fi
}

inline headrecs(out) {
	out = 0;
	n = 0;
	do
	:: n < NNAMES ->
		if
		:: chead[hg] & (1 << n) -> out = out | content[n]
		:: else -> skip
		fi;
		n++
	:: else -> break
	od
}

inline check() {
	headrecs(hr);
	k = 0;
	do
	:: k < NK ->
		readk(hr, k, got);
		readk(ghost, k, want);
		assert(got == want); /* P1 */
		k++
	:: else -> break
	od;
	n = 0;
	do
	:: n < NNAMES ->
		if
		:: chead[hg] & (1 << n) ->
			assert(live[n]);          /* P2 */
			assert(life[n] == hlife)  /* P3 */
		:: else -> skip
		fi;
		n++
	:: else -> break
	od;
	assert(!stale_applied) /* P4 */
}

/* commit appends a version on the head: head names h, records added a. */
inline commit(h, a, cut) {
	clife[ng] = hlife;
	cver[ng] = cver[hg] + 1;
	cparent[ng] = hg;
	chead[ng] = h;
	caddrec[ng] = a;
	ccut[ng] = cut;
	ucut = ucut || (cut && ubuilt);
	cexp[ng] = ghost;
	hg = ng;
	ng++
}

/* The writer's new object under name nm with records r. */
inline put(nm, r) {
	content[nm] = r;
	live[nm] = true;
	life[nm] = hlife
}

/* Merge the records of objects in mask m, keeping each key's latest and
 * dropping a winning delete marker (drop_deletes: m is every object). */
inline merge(m, out) {
	all = 0;
	n = 0;
	do
	:: n < NNAMES ->
		if
		:: m & (1 << n) -> all = all | content[n]
		:: else -> skip
		fi;
		n++
	:: else -> break
	od;
	out = 0;
	k = 0;
	do
	:: k < NK ->
		readk(all, k, got);
		if
		:: got > 0 -> out = out | REC(k, (got - 1) / 2, 0)
		:: else -> skip
		fi;
		k++
	:: else -> break
	od
}

/* The publisher's conflict check of the pending request on head hg: ok
 * when it may be applied there; rem is what the publisher then removes. */
inline judge(ok, rem) {
	ok = true;
	rem = rin;
	/* incarnation: same lifetime, the base an ancestor of the head */
#ifndef MUT_INC
	if
	:: hlife != rlife -> ok = false
	:: else ->
		g = hg;
		do
		:: g == rbase -> break
		:: g == NONE || cver[g] <= cver[rbase] -> ok = false; break
		:: else -> g = cparent[g]
		od
	fi;
#endif
	/* input_gone, checksum_changed */
	n = 0;
	do
	:: ok && n < NNAMES ->
		if
		:: (rin & (1 << n)) && !(chead[hg] & (1 << n)) ->
#ifndef MUT_INPUT
			ok = false
#else
			rem = rem & ~(1 << n)
#endif
		:: (rin & (1 << n)) && (chead[hg] & (1 << n)) && content[n] != rchk[n] ->
#ifndef MUT_SUM
			ok = false
#else
			skip
#endif
		:: else -> skip
		fi;
		n++
	:: else -> break
	od;
	/* delete_since_base: the commits on the head's chain above the base's
	 * version (by version number: with the incarnation clause they are
	 * exactly those since the base) */
#ifndef MUT_DEL
	inrecs = 0;
	n = 0;
	do
	:: n < NNAMES ->
		if
		:: rin & (1 << n) -> inrecs = inrecs | rchk[n]
		:: else -> skip
		fi;
		n++
	:: else -> break
	od;
	g = hg;
	do
	:: ok && g != NONE && clife[g] == hlife && cver[g] > cver[rbase] ->
		if
		:: !ccut[g] ->
			k = 0;
			do
			:: k < NK ->
				/* an added record of key k ordered at or before the
				 * newest input record, over a key the inputs hold */
				s = 0;
				do
				:: s < NS ->
					if
					:: (caddrec[g] & (REC(k, s, 0) | REC(k, s, 1))) && (inrecs & KEYRECS(k)) && s <= rmaxseq -> ok = false
					:: else -> skip
					fi;
					s++
				:: else -> break
				od;
				k++
			:: else -> break
			od
		:: else -> skip
		fi;
		g = cparent[g]
	:: else -> break
	od;
#endif
	skip
}

/* The actors' steps (each one d_step: atomic and deterministic; the
 * choices are the options of init's loop). */

inline append(ak, ad) {
	appends++;
	n = cver[hg] + 1;
	put(n, REC(ak, nseq, ad));
	ghost = ghost | REC(ak, nseq, ad);
	commit(chead[hg] | (1 << n), REC(ak, nseq, ad), false);
	nseq++;
	check()
}

inline build(rec) {
	ubuilt = true;
	urec = rec;
	nseq++
}

/* The writer's first object in the head (not an output), n == 8 if none. */
inline firstobject() {
	n = 1;
	do
	:: n < 8 && (chead[hg] & (1 << n)) -> break
	:: n < 8 && !(chead[hg] & (1 << n)) -> n++
	:: else -> break
	od
}

inline compact() {
	compactions++;
	rin = chead[hg];
	merge(rin, out);
	rout = 7 + compactions;
	put(rout, out);
	rbase = hg; rlife = hlife; rfacts = facts; rexpired = false;
	rmaxseq = 0;
	n = 0;
	do
	:: n < NNAMES ->
		rchk[n] = 0;
		if
		:: rin & (1 << n) -> rchk[n] = content[n]
		:: else -> skip
		fi;
		s = 0;
		do
		:: s < NS ->
			if
			:: rchk[n] & (REC(0, s, 0) | REC(0, s, 1) | REC(1, s, 0) | REC(1, s, 1)) -> rmaxseq = (s > rmaxseq -> s : rmaxseq)
			:: else -> skip
			fi;
			s++
		:: else -> break
		od;
		n++
	:: else -> break
	od;
	pending = true
}

inline publish() {
	pending = false;
	if
	:: rexpired -> skip
	:: !rexpired && hg == rbase ->
		/* on its base: only the facts are judged */
		ok = true;
#ifndef MUT_FACTS
		ok = rfacts == facts;
#endif
		if
		:: ok ->
			stale_applied = stale_applied || (rfacts != facts);
			commit((chead[hg] & ~rin) | (1 << rout), content[rout], true)
		:: else -> skip
		fi
	:: !rexpired && hg != rbase ->
#ifdef NOCAP
		skip
#else
		judge(ok, rem);
#ifndef MUT_FACTS
		ok = ok && rfacts == facts;
#endif
		if
		:: ok ->
			stale_applied = stale_applied || (rfacts != facts);
			commit((chead[hg] & ~rem) | (1 << rout), content[rout], true)
		:: else -> skip
		fi
#endif
	fi;
	check()
}

/* GC deletes the first object nothing may still need (which one it takes
 * first does not matter to the properties). */
inline collect() {
	n = 1;
	do
	:: n < NNAMES ->
		if
		:: DELETABLE(n) -> live[n] = false; break
		:: else -> n++
		fi
	:: else -> break
	od;
	check()
}


init {
	byte n, k, s, g, got, want;
	int hr, all, out, inrecs;
	bool ok;
	short rem;
	/* v1 of lifetime 1: empty */
	clife[0] = 1; cver[0] = 1; cparent[0] = NONE; chead[0] = 0; cexp[0] = 0;
end:	/* every bound reached: a valid end */
	do
	/* writer: append a put or a delete of key 0, or a put of key 1 */
	:: d_step { appends < 3 && CANCOMMIT -> append(0, 0) }
	:: d_step { appends < 3 && CANCOMMIT -> append(0, 1) }
	:: d_step { appends < 3 && CANCOMMIT -> append(1, 0) }
#ifdef SCOPE_DATA
	/* writer: build an upload (a put of key 0) on the head it sees: its
	 * record takes the next sequence number, so the appends committed
	 * before the upload are ordered after it (a delete among them would
	 * hide it) */
	:: d_step { !ubuilt && !recreated && nseq < NS -> build(REC(0, nseq, 0)) }
	/* writer: commit the upload late */
	:: d_step { ubuilt && !ucommitted && !recreated && !ucut && CANCOMMIT ->
		ucommitted = true;
		n = cver[hg] + 1;
		put(n, urec);
		ghost = ghost | urec;
		commit(chead[hg] | (1 << n), urec, false);
		check() }
	/* writer: remove its first object from the head */
	:: d_step { !wdone && CANCOMMIT ->
		wdone = true;
		firstobject();
		if
		:: n < 8 ->
			ghost = ghost & ~content[n];
			commit(chead[hg] & ~(1 << n), 0, false)
		:: else -> skip
		fi;
		check() }
	/* writer: replace its first object in place (same name, a new put of
	 * key 0). Older versions then no longer read as they were committed
	 * (why keys are immutable): no restore follows one. */
	:: d_step { !wdone && CANCOMMIT ->
		wdone = true;
		restored = true;
		firstobject();
		if
		:: n < 8 ->
			ghost = (ghost & ~content[n]) | REC(0, nseq, 0);
			content[n] = REC(0, nseq, 0);
			commit(chead[hg], REC(0, nseq, 0), false);
			nseq++
		:: else -> skip
		fi;
		check() }
	/* owner: restore the head to the version it superseded */
	:: d_step { !restored && cparent[hg] != NONE && clife[cparent[hg]] == hlife ->
		restored = true;
		hg = cparent[hg];
		ghost = cexp[hg];
		check() }
#endif
#ifdef SCOPE_LIFE
	/* owner: drop the name and re-create it: a new lifetime at v1 */
	:: d_step { !recreated && ng < MAXG ->
		recreated = true;
		hlife = 2;
		nseq = 1;
		ghost = 0;
		appends = 0;
		clife[ng] = hlife; cver[ng] = 1; cparent[ng] = NONE; chead[ng] = 0; caddrec[ng] = 0; ccut[ng] = false; cexp[ng] = 0;
		hg = ng;
		ng++;
		check() }
	/* owner: CCS facts change */
	:: d_step { !fchanged -> fchanged = true; facts++ }
#endif
	/* compactor: plan at the head (two objects or more), write the
	 * output, submit */
	:: d_step { !pending && compactions < MAXC && (chead[hg] & (chead[hg] - 1)) != 0 -> compact() }
	/* the request's deadline passes */
	:: d_step { pending && !rexpired -> rexpired = true }
	/* publisher: judge the request at its head CAS */
	:: d_step { pending && ng < MAXG -> publish() }
	/* GC */
	:: d_step { gcable() -> collect() }
	od
}
