;;;; stats-tests.lisp - the neighbourhood statistics against a double-float oracle
;;;; written here: brute-force neighbourhoods with the contract's distances
;;;; (ties by index), the scatter matrix of each, its smallest eigenvector by
;;;; power iteration on (trace I - S), and the scores, thresholds and counts
;;;; by the header's definitions.

(in-package #:knn-gpgpu-tests)

;;; ---- clouds ------------------------------------------------------------------------

(defun sphere-cloud (seed n radius &optional (element-type 'double-float))
  "N points on the sphere of RADIUS about the origin, a flat vector."
  (let ((state (sb-ext:seed-random-state seed))
        (v (make-array (* 3 n) :element-type element-type)))
    (dotimes (i n v)
      (let* ((z (- (random 2d0 state) 1d0))
             (phi (random (* 2 pi) state))
             (r (sqrt (- 1d0 (* z z)))))
        (setf (aref v (* 3 i)) (coerce (* radius r (cos phi)) element-type)
              (aref v (+ 1 (* 3 i))) (coerce (* radius r (sin phi)) element-type)
              (aref v (+ 2 (* 3 i))) (coerce (* radius z) element-type))))))

(defun plane-cloud (seed n &optional (element-type 'double-float))
  "N points of the plane x + 2y + 2z = 0 (normal (1 2 2)/3)."
  (let ((state (sb-ext:seed-random-state seed))
        (v (make-array (* 3 n) :element-type element-type)))
    (dotimes (i n v)
      (let ((a (- (random 2d0 state) 1d0))
            (b (- (random 2d0 state) 1d0)))
        ;; u = (2 -1 0)/sqrt5 and w = (2 4 -5)/(3 sqrt5) span the plane
        (setf (aref v (* 3 i)) (coerce (/ (+ (* 2 a) (* 2/3 b)) (sqrt 5d0)) element-type)
              (aref v (+ 1 (* 3 i))) (coerce (/ (+ (- a) (* 4/3 b)) (sqrt 5d0)) element-type)
              (aref v (+ 2 (* 3 i))) (coerce (/ (* -5/3 b) (sqrt 5d0)) element-type))))))

;;; ---- the oracle --------------------------------------------------------------------

(defun stats-neighbours (pts i)
  "Indices of every point by (distance to point I, index), with their squared
distances in the points' precision, as two vectors."
  (let* ((n (floor (length pts) 3))
         (f64 (typep pts '(simple-array double-float (*))))
         (d (make-array n))
         (order (make-array n)))
    (dotimes (r n)
      (setf (aref order r) r
            (aref d r) (if f64 (sq-distance-64 pts (* 3 i) pts (* 3 r) 3)
                           (sq-distance pts (* 3 i) pts (* 3 r) 3))))
    (let ((sorted (stable-sort order #'< :key (lambda (r) (aref d r)))))
      (values sorted (map 'vector (lambda (r) (aref d r)) sorted)))))

(defun pca-oracle (pts i k)
  "(values normal curvature) of point I's K nearest: the smallest eigenvector of
their scatter matrix (power iteration on trace I - S, double-float) and
l0 / trace."
  (let* ((ids (subseq (stats-neighbours pts i) 0 (min k (floor (length pts) 3))))
         (m (length ids))
         (mean (list 0d0 0d0 0d0))
         (s (make-array '(3 3) :element-type 'double-float :initial-element 0d0)))
    (loop for id across ids
          do (dotimes (c 3) (incf (nth c mean) (/ (coerce (aref pts (+ (* 3 id) c)) 'double-float) m))))
    (loop for id across ids
          do (let ((e (loop for c below 3
                            collect (- (coerce (aref pts (+ (* 3 id) c)) 'double-float)
                                       (nth c mean)))))
               (dotimes (a 3) (dotimes (b 3) (incf (aref s a b) (* (nth a e) (nth b e)))))))
    (let* ((trace (+ (aref s 0 0) (aref s 1 1) (aref s 2 2)))
           (v (list 0.577d0 0.5773d0 0.5775d0)))
      (dotimes (iteration 400)
        (let* ((w (loop for a below 3
                        collect (- (* trace (nth a v))
                                   (loop for b below 3 sum (* (aref s a b) (nth b v))))))
               (len (sqrt (reduce #'+ (mapcar #'* w w)))))
          (setf v (mapcar (lambda (x) (/ x len)) w))))
      (let ((l0 (loop for a below 3
                      sum (* (nth a v) (loop for b below 3 sum (* (aref s a b) (nth b v)))))))
        (values v (if (plusp trace) (/ l0 trace) 0d0))))))

(defun row3 (v i) (list (aref v (* 3 i)) (aref v (+ 1 (* 3 i))) (aref v (+ 2 (* 3 i)))))

(defun line-angle (a b)
  "Angle between the lines of A and B (sign ignored)."
  (let* ((a (mapcar (lambda (x) (coerce x 'double-float)) a))
         (d (abs (reduce #'+ (mapcar #'* a b))))
         (c (cross a b)))
    (atan (sqrt (reduce #'+ (mapcar #'* c c))) d)))

;;; ---- normals -----------------------------------------------------------------------

(deftest stats-normals-match-a-double-oracle
  (dolist (scalar '(:float64 :float32))
    (let ((type (if (eq scalar :float64) 'double-float 'single-float)))
      (dolist (cloud (list (sphere-cloud 3 300 2d0 type) (plane-cloud 4 300 type)))
        (knn:with-index (index cloud 3 :backend :openmp)
          (check (eq (knn:index-scalar index) scalar))
          (multiple-value-bind (normals curvature)
              (knn:index-normals index 10 :viewpoint '(0.3 -0.2 5.0))
            (check (typep normals `(simple-array ,type (*))))
            (check (= (length normals) 900))
            (check (= (length curvature) 300))
            (let ((worst 0d0) (worst-curvature 0d0) (away 0))
              (dotimes (i 300)
                (multiple-value-bind (want want-curvature) (pca-oracle cloud i 10)
                  (setf worst (max worst (line-angle (row3 normals i) want))
                        worst-curvature (max worst-curvature
                                             (abs (- (aref curvature i) want-curvature)))))
                (let ((p (row3 cloud i)) (nrm (row3 normals i)))
                  (when (< (+ (* (first nrm) (- 0.3d0 (first p)))
                              (* (second nrm) (- -0.2d0 (second p)))
                              (* (third nrm) (- 5d0 (third p))))
                           -1d-6)
                    (incf away))))
              (check (< worst 1d-5) (format nil "~A: normals within 1e-5 rad (~,3E)" scalar worst))
              (check (< worst-curvature 1d-6)
                     (format nil "~A: curvature (~,3E)" scalar worst-curvature))
              (check (zerop away) "every normal towards the viewpoint"))))))))

(deftest stats-normals-orientation-and-degenerate-cases
  ;; A closed sphere without a viewpoint: every normal outward.
  (let ((cloud (sphere-cloud 5 500 1d0)))
    (knn:with-index (index cloud 3 :backend :openmp)
      (let ((normals (knn:index-normals index 10 :curvature nil)))
        (check (loop for i below 500
                     always (plusp (reduce #'+ (mapcar #'* (row3 normals i) (row3 cloud i)))))
               "all outward"))))
  ;; All points equal: (0 0 1), curvature 0; towards a viewpoint below: (0 0 -1).
  (let ((same (make-array 30 :element-type 'single-float :initial-element 1.5)))
    (knn:with-index (index same 3)
      (multiple-value-bind (normals curvature) (knn:index-normals index 4)
        (check (equalp (row3 normals 7) '(0.0 0.0 1.0)))
        (check (every #'zerop curvature)))
      (check (equalp (row3 (knn:index-normals index 4 :viewpoint '(0 0 -9)) 2) '(0.0 0.0 -1.0)))))
  ;; A 2-D index, k < 1: the library refuses them.
  (knn:with-index (flat (make-array 8 :element-type 'single-float :initial-element 0.0) 2)
    (check-signals knn:knn-invalid-argument (knn:index-normals flat 3)))
  (knn:with-index (index (sphere-cloud 6 20 1d0) 3)
    (check-signals knn:knn-invalid-argument (knn:index-normals index 0))
    (check-signals knn:knn-usage-error (knn:index-normals index 3 :viewpoint '(1 2)))))

;;; ---- outliers and densities --------------------------------------------------------

(defun cloud-with-spray (seed n n-spray)
  "A sphere of radius 1 and N-SPRAY points 2 to 3 from its centre, after it."
  (let ((surface (sphere-cloud seed n 1d0))
        (spray (sphere-cloud (1+ seed) n-spray 1d0))
        (state (sb-ext:seed-random-state (+ 2 seed))))
    (dotimes (i n-spray)
      (let ((r (+ 2d0 (random 1d0 state))))
        (dotimes (c 3) (setf (aref spray (+ (* 3 i) c)) (* r (aref spray (+ (* 3 i) c)))))))
    (concatenate '(simple-array double-float (*)) surface spray)))

(defun scores-oracle (pts k)
  (let ((n (floor (length pts) 3)))
    (map 'vector (lambda (i)
                   (multiple-value-bind (ids d) (stats-neighbours pts i)
                     (declare (ignore ids))
                     (let ((m (min k (1- n))))
                       (if (zerop m) 0d0
                           (/ (loop for j from 1 to m sum (sqrt (aref d j))) m)))))
         (loop for i below n collect i))))

(deftest stats-outliers-and-densities-match-the-oracle
  (let* ((pts (cloud-with-spray 11 400 8))
         (n 408))
    (knn:with-index (index pts 3 :backend :openmp)
      (let ((scores (knn:index-outlier-scores index 6))
            (want (scores-oracle pts 6)))
        (check (typep scores '(simple-array double-float (*))))
        (check (every (lambda (a b) (< (abs (- a b)) (* 1d-13 (max 1d0 b)))) scores want)
               "scores")
        ;; the rule on the scores as written, sums in index order
        (let* ((mean (/ (reduce #'+ scores) n))
               (std (sqrt (/ (reduce #'+ (map 'vector (lambda (s) (expt (- s mean) 2)) scores))
                             (1- n))))
               (rule (loop for i below n when (<= (aref scores i) (+ mean (* 2 std))) collect i)))
          (multiple-value-bind (ids count) (knn:index-statistical-inliers index 6)
            (check (= count (length rule)))
            (check (equalp (coerce ids 'list) rule) "kept ids")
            (check (notany (lambda (i) (>= i 400)) (coerce ids 'list)) "the spray dropped"))))
      (dolist (k '(1 5))
        (let ((got (knn:index-kth-distances index k)))
          (check (loop for i below n
                       always (multiple-value-bind (ids d) (stats-neighbours pts i)
                                (declare (ignore ids))
                                (= (aref got i) (sqrt (aref d k)))))
                 (format nil "k-th distances, k = ~D" k))))
      (check (every #'sb-ext:float-infinity-p (knn:index-kth-distances index n)))
      (let ((counts (knn:index-neighbor-counts index 0.3d0))
            (want (map 'vector (lambda (i)
                                 (1- (count-if (lambda (d) (<= d (* 0.3d0 0.3d0)))
                                               (nth-value 1 (stats-neighbours pts i)))))
                       (loop for i below n collect i))))
        (check (equalp counts want) "neighbour counts")
        (multiple-value-bind (ids count) (knn:index-radius-inliers index 0.3d0 3)
          (check (equalp (coerce ids 'list) (loop for i below n when (>= (aref want i) 3) collect i)))
          (check (= count (length ids))))
        (check (= n (nth-value 1 (knn:index-radius-inliers index 0.3d0 0))))))))

(deftest stats-estimates
  (let ((small (knn:estimate-stats-bytes 1000 16)))
    (check (plusp small))
    (check (> (knn:estimate-stats-bytes 1000000 16) small))
    (check (>= (knn:estimate-stats-bytes 1000 16 nil :float64) small))
    (check (zerop (knn:estimate-stats-bytes 1000 0)))))

;;; ---- alignment to the index's points ------------------------------------------------

(defun ellipsoid-cloud (seed n)
  "N points on an ellipsoid of axes 1, 0.6, 0.3: no rotation maps it onto itself
but the half turns, so a small motion is observable."
  (let ((v (sphere-cloud seed n 1d0)))
    (dotimes (i n v)
      (setf (aref v (+ 1 (* 3 i))) (* 0.6d0 (aref v (+ 1 (* 3 i))))
            (aref v (+ 2 (* 3 i))) (* 0.3d0 (aref v (+ 2 (* 3 i))))))))

(defun moved-cloud (cloud angle translation)
  "CLOUD turned by ANGLE about the z axis, then moved by TRANSLATION."
  (let ((out (make-array (length cloud) :element-type 'double-float))
        (c (cos angle)) (s (sin angle)))
    (dotimes (p (floor (length cloud) 3) out)
      (let ((x (aref cloud (* 3 p))) (y (aref cloud (+ 1 (* 3 p)))) (z (aref cloud (+ 2 (* 3 p)))))
        (setf (aref out (* 3 p)) (+ (- (* c x) (* s y)) (first translation))
              (aref out (+ 1 (* 3 p))) (+ (* s x) (* c y) (second translation))
              (aref out (+ 2 (* 3 p))) (+ z (third translation)))))))

(defun largest-misfit (transform scan cloud)
  "The largest distance between TRANSFORM applied to SCAN and CLOUD, point by point."
  (let ((worst 0d0))
    (dotimes (p (floor (length scan) 3) worst)
      (let ((d 0d0))
        (dotimes (i 3)
          (let ((moved (+ (aref transform i 3)
                          (loop for j below 3
                                sum (* (aref transform i j) (aref scan (+ j (* 3 p))))))))
            (incf d (expt (- moved (aref cloud (+ i (* 3 p)))) 2))))
        (setf worst (max worst (sqrt d)))))))

(deftest index-align-recovers-a-rigid-motion
  ;; The scan is the index's own points moved; the fit must bring every scan
  ;; point back onto its original, point to point and point to plane.
  (let* ((cloud (ellipsoid-cloud 7 400))
         (scan (moved-cloud cloud 0.04d0 '(0.02d0 -0.01d0 0.015d0))))
    (knn:with-index (index cloud 3 :backend :openmp)
      (let ((fit (knn:index-align index scan :max-iterations 100)))
        (check (knn:align-result-converged fit) "point to point converged")
        (check (= (knn:align-result-n-kept fit) 400))
        (check (< (largest-misfit (knn:align-result-transform fit) scan cloud) 1d-6)
               (format nil "point to point misfit ~A"
                       (largest-misfit (knn:align-result-transform fit) scan cloud))))
      (let* ((normals (knn:index-normals index 12 :curvature nil))
             (fit (knn:index-align index scan :normals normals :max-iterations 100)))
        (check (knn:align-result-converged fit) "point to plane converged")
        (check (< (largest-misfit (knn:align-result-transform fit) scan cloud) 1d-5)
               (format nil "point to plane misfit ~A"
                       (largest-misfit (knn:align-result-transform fit) scan cloud))))
      (check-signals knn:knn-usage-error (knn:index-align index scan :normals '(0 0 1)))
      (check-signals knn:knn-usage-error (knn:index-align index '(1 2))))))

(defun as-rows (flat columns)
  "FLAT as a 2-D array of COLUMNS columns (row-major)."
  (let ((out (make-array (list (floor (length flat) columns) columns) :element-type 'double-float)))
    (dotimes (i (length flat) out)
      (setf (row-major-aref out i) (aref flat i)))))

(deftest index-align-takes-rows-as-the-index-calls-do
  ;; Points and normals are rows of 3 as for every index call: an (m 3) array
  ;; or a foreign pointer with :COUNT fits as the flat vector does, to the bit;
  ;; an array of another width is refused, not flattened into other points.
  (let* ((cloud (ellipsoid-cloud 5 300))
         (scan (moved-cloud cloud 0.03d0 '(0.01d0 0.02d0 -0.01d0))))
    (knn:with-index (index cloud 3 :backend :openmp)
      (let* ((normals (knn:index-normals index 12 :curvature nil))
             (flat (knn:index-align index scan :normals normals :max-iterations 30))
             (rows (knn:index-align index (as-rows scan 3) :normals (as-rows normals 3)
                                          :max-iterations 30))
             (foreign (cffi:with-foreign-objects ((p :double (length scan))
                                                  (np :double (length normals)))
                        (dotimes (i (length scan)) (setf (cffi:mem-aref p :double i) (aref scan i)))
                        (dotimes (i (length normals))
                          (setf (cffi:mem-aref np :double i) (aref normals i)))
                        (knn:index-align index p :count 300 :normals np :max-iterations 30))))
        (check (< (largest-misfit (knn:align-result-transform flat) scan cloud) 1d-5))
        (dolist (other (list rows foreign))
          (check (equalp (knn:align-result-transform other) (knn:align-result-transform flat))
                 "the same fit from rows and from a foreign pointer")
          (check (= (knn:align-result-n-kept other) 300)))
        (check-signals knn:knn-usage-error (knn:index-align index (as-rows (subseq scan 0 12) 4))
                       "points of 4 columns")
        (check-signals knn:knn-usage-error (knn:index-align index scan :normals (as-rows normals 4))
                       "normals of 4 columns")
        (check-signals knn:knn-usage-error (knn:index-align index (cffi:null-pointer))
                       "a pointer without :count")))))
