"""Analyses: what several rules need to know about the code, computed once per file.

An analysis is made only when a selected rule requires it (directly or through another
analysis). It may define `visit_<Node>` / `leave_<Node>` handlers: the traversal calls them
before the rules' on the way down and after them on the way up, so a rule always sees an
analysis up to date for the node it is at. Rules reach one as `self.ctx[AnalysisClass]`.
The base class, `Analysis`, is in `devlint.api` with `Rule`.
"""
