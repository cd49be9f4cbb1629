/**
 * Advisory-lock keys (the two-int4 form, `(namespace, key)`):
 *
 * - `(REAKTOR_LOCK_NAMESPACE, hashtext(reaktorId))`: ownership of one reaktor. hashtext is 32 bits,
 *   so two ids can collide; colliding ids then always share one owner (whoever holds the key runs
 *   both). That is harmless for correctness; it only makes spreading coarser. The scheduler tracks
 *   keys, not ids, so it never takes a key its session already holds.
 * - `(CLUSTER_LOCK_NAMESPACE, 0)`: cluster membership. Every live node holds it SHARED on its lock
 *   connection; a booting node that can take it EXCLUSIVE knows no other node is alive (cold start).
 *   The number of sessions holding it is the number of live nodes (even spreading).
 *
 * Both namespaces are fixed constants ("RKTO"/"RKTC" in ASCII) so other users of advisory locks in
 * the same database are unlikely to collide with them. In pg_locks a two-int4 advisory lock shows
 * as `classid = namespace, objid = key (as unsigned), objsubid = 2`.
 */
export const REAKTOR_LOCK_NAMESPACE = 0x524b_544f
export const CLUSTER_LOCK_NAMESPACE = 0x524b_5443
