/**
 * Advisory-lock keys (the two-int4 form, `(namespace, key)`):
 *
 * - `(PARTITION_LOCK_NAMESPACE, partition)`: ownership of one partition, i.e. of every reaktor
 *   whose id maps to it (see partitions.ts). A cluster holds at most `partitions` of these,
 *   whatever the number of reaktors. The scheduler tracks the keys its session holds and never
 *   takes a held one again (session locks stack: one unlock would then leave it held).
 * - `(CLUSTER_LOCK_NAMESPACE, 0)`: cluster membership. Every live node holds it SHARED on its lock
 *   connection; a booting node that can take it EXCLUSIVE knows no other node is alive (cold start).
 * - `(CLUSTER_LOCK_NAMESPACE, 1)`: held SHARED, beside the membership lock, by nodes that own by
 *   partition. A membership holder without it is a node of the previous version (one lock per
 *   reaktor, `REAKTOR_LOCK_NAMESPACE`): the two must never run side by side.
 * - `(CLUSTER_LOCK_NAMESPACE, 2)`: held SHARED by a node shutting down that keeps the partitions of
 *   runs still in flight past its grace: still alive (no false cold start), but no longer a member
 *   that the others count when they share out the reaktors.
 *
 * The namespaces are fixed constants ("RKTP"/"RKTC"/"RKTO" in ASCII) so other users of advisory
 * locks in the same database are unlikely to collide with them. In pg_locks a two-int4 advisory
 * lock shows as `classid = namespace, objid = key (as unsigned), objsubid = 2`.
 */
export const PARTITION_LOCK_NAMESPACE = 0x524b_5450
export const CLUSTER_LOCK_NAMESPACE = 0x524b_5443
/** The per-reaktor namespace of the previous version; only looked for, never taken. */
export const REAKTOR_LOCK_NAMESPACE = 0x524b_544f
export const MEMBERSHIP_KEY = 0
export const PARTITIONED_PROTOCOL_KEY = 1
export const LEAVING_KEY = 2
